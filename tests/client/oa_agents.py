"""Real OpenAI Agents SDK agents for the Signoff tests, on `agents.testing.ScriptedModel` (offline).

Tools record each call in the file named by OA_CALLS (JSON lines), so any process's calls are seen.
Run as a script, it starts a run until its first pause (`start`) or resumes one (`resume`), as an
agent process and a resumer process would:

    python -m tests.client.oa_agents start RUNS_DIR RUN_ID
    python -m tests.client.oa_agents resume RUNS_DIR RUN_ID   # prints the outcome as JSON
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from agents import Agent, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from signoff.openai import Approvals

set_tracing_disabled(True)


def record(name: str, args: dict[str, Any]) -> None:
    with open(os.environ["OA_CALLS"], "a") as f:
        f.write(json.dumps({"tool": name, "args": args}) + "\n")


def calls() -> list[dict[str, Any]]:
    path = os.environ["OA_CALLS"]
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


def email(to: str = "c@example.com", subject: str = "Your refund", call_id: str = "call_mail") -> Any:
    return function_call("send_email", {"to": to, "subject": subject}, call_id=call_id)


def done(text: str = "done") -> list[Any]:
    return [assistant_message(text)]


def build(approvals: Approvals, steps: Sequence[Any]) -> tuple[Agent[Any], ScriptedModel]:
    """The mailer agent with its gated tools, on a model scripted with `steps` (each a list of items)."""

    @approvals.tool
    def send_email(to: str, subject: str) -> str:
        """Send an email."""
        record("send_email", {"to": to, "subject": subject})
        return f"sent to {to}: {subject}"

    @approvals.tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        record("delete_file", {"path": path})
        return f"deleted {path}"

    @approvals.tool
    def read_file(path: str) -> str:
        """Read a file."""
        record("read_file", {"path": path})
        return f"contents of {path}"

    @approvals.tool
    def drop_table(name: str) -> str:
        """Drop a database table."""
        record("drop_table", {"name": name})
        return f"dropped {name}"

    model = ScriptedModel(list(steps))
    return Agent(name="mailer", model=model, tools=[send_email, delete_file, read_file, drop_table]), model


def outputs(model: ScriptedModel) -> dict[str, str]:
    """What the model read back for each call, in its last request: call id -> the call's output."""
    last = model.last_call
    assert last is not None
    return {str(i["call_id"]): str(i["output"]) for i in last.input
            if isinstance(i, dict) and i.get("type") == "function_call_output"}


async def main(command: str, folder: str, run_id: str) -> None:
    approvals = Approvals(folder, channel="C1", approvers=["U1"])
    if command == "start":
        from agents import Runner

        agent, _ = build(approvals, [[email()]])
        result = await Runner.run(agent, "Send the refund email")
        paused = await approvals.pause(result, run_id)
        assert paused is not None
        print(json.dumps({"request_id": paused.request_ids[0]}))
    else:
        agent, model = build(approvals, [done("Sent it.")])
        result = await approvals.resume(agent, run_id, wait=10)
        print(json.dumps(None if result is None else {"final": result.final_output, "outputs": outputs(model)}))
    await approvals.aclose()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
