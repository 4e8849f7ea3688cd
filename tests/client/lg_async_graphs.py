"""Real LangGraph graphs whose nodes are `async def` (run with `ainvoke` / `astream`), importable by
subprocesses (`module:function`). Tools record each call in LG_CALLS, as in lg_graphs."""

from __future__ import annotations

import asyncio
import os
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from signoff.langgraph import aapproval, aask
from tests.client.lg_graphs import record


class Refund(TypedDict, total=False):
    to: str
    approved: dict[str, Any]
    sent: str
    env: str


async def approve(state: Refund) -> Refund:
    await asyncio.sleep(0)  # a real coroutine node: it runs on the graph's event loop
    decision = await aapproval("send_email", {"to": state["to"], "subject": "Your refund"},
                               summary=f"Email {state['to']}", channel="C1", approvers=["U1"],
                               callback_url=os.environ.get("LG_HOOK_URL") or None,
                               params_schema={"type": "object", "properties": {"to": {"type": "string"},
                                                                              "subject": {"type": "string"}}})
    return {"approved": decision.params}


async def send(state: Refund) -> Refund:
    record("send_email", state["approved"])
    return {"sent": f"sent to {state['approved']['to']}: {state['approved']['subject']}"}


def async_graph(checkpointer: Any) -> Any:
    """aapproval() in one async node, the tool in the next."""
    return (StateGraph(Refund).add_node("approve", approve).add_node("send", send)
            .add_edge(START, "approve").add_edge("approve", "send").add_edge("send", END)
            .compile(checkpointer=checkpointer))


async def clarify(state: Refund) -> Refund:
    answers = await aask([{"question": "Which environment?", "header": "Env", "options": ["staging", "production"]}],
                         summary="Deploy the release", channel="C1")
    return {"env": answers["Which environment?"].value}


async def deploy(state: Refund) -> Refund:
    record("deploy", {"env": state["env"]})
    return {"sent": state["env"]}


def async_question_graph(checkpointer: Any) -> Any:
    return (StateGraph(Refund).add_node("clarify", clarify).add_node("deploy", deploy)
            .add_edge(START, "clarify").add_edge("clarify", "deploy").add_edge("deploy", END)
            .compile(checkpointer=checkpointer))
