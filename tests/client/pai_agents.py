"""Real Pydantic AI agents for the Signoff tests, importable by subprocesses.

The model is Pydantic AI's own `FunctionModel` (offline): it asks for the scripted tool calls, and
once tools answered it sums up what each said (`name[outcome]: content`), so a test reads what the
model was told. Tools record each call in the file named by PAI_CALLS (JSON lines), so any
process's calls are seen.

    python -m tests.client.pai_agents start STATE    run until a person must decide; save the pause
    python -m tests.client.pai_agents resume STATE   continue it once decided (prints `resumed: ...`
                                                           or `taken`)
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests

from signoff.pydantic_ai import Paused, SignoffApprovals

CARD = {"channel": "C1", "approvers": ["U1"]}
REFUND = [("send_email", {"to": "customer@example.com", "subject": "Your refund"})]
TIDY = [("send_email", {"to": "a@example.com", "subject": "Hi"}), ("read_file", {"path": "/tmp/report.txt"}),
        ("delete_file", {"path": "/srv/prod/db", "env": "prod"})]


def record(name: str, args: dict[str, Any]) -> None:
    with open(os.environ["PAI_CALLS"], "a") as f:
        f.write(json.dumps({"tool": name, "args": args}) + "\n")


def calls() -> list[dict[str, Any]]:
    path = os.environ["PAI_CALLS"]
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


def scripted(wanted: Sequence[tuple[str, dict[str, Any]]]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if isinstance(messages[-1], ModelRequest) and any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            told = [p for m in messages if isinstance(m, ModelRequest)
                    for p in m.parts if isinstance(p, ToolReturnPart)]
            return ModelResponse(parts=[TextPart(" | ".join(f"{p.tool_name}[{p.outcome}]: {p.content}" for p in told))])
        return ModelResponse(parts=[ToolCallPart(name, dict(args)) for name, args in wanted])

    return FunctionModel(respond)


def build(approvals: SignoffApprovals, wanted: Sequence[tuple[str, dict[str, Any]]] = REFUND) -> Agent[None, Any]:
    agent: Agent[None, Any] = Agent(scripted(wanted), output_type=[str, DeferredToolRequests],  # type: ignore[arg-type]
                                    capabilities=[approvals.capability()])

    @agent.tool_plain(requires_approval=True)
    def send_email(to: str, subject: str) -> str:
        record("send_email", {"to": to, "subject": subject})
        return f"sent to {to}: {subject}"

    @agent.tool_plain(requires_approval=True)
    def read_file(path: str) -> str:
        record("read_file", {"path": path})
        return f"read {path}"

    @agent.tool_plain(requires_approval=True)
    def delete_file(path: str, env: str = "dev") -> str:
        record("delete_file", {"path": path, "env": env})
        return f"deleted {path}"

    return agent


async def main(command: str, state: Path) -> None:
    approvals = SignoffApprovals(**CARD)  # wait=0: end the run when a person must decide
    agent = build(approvals)
    if command == "start":
        result = await agent.run("Send the refund email")
        assert isinstance(result.output, DeferredToolRequests), result.output
        paused = await approvals.pause(result)
        state.write_text(paused.to_json())
        print(paused.request_id)
        return
    resumed = await approvals.resume(agent, Paused.from_json(state.read_text()))
    print("taken" if resumed is None else f"resumed: {resumed.output}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
