"""Real LangGraph / LangChain graphs for the Signoff tests, importable by subprocesses (`module:function`).

The chat model is LangChain's GenericFakeChatModel, scripted by the conversation rather than by an
iterator, so a process that resumes a thread (and builds a fresh model) answers the same way.
Tools record each call in the file named by LG_CALLS (JSON lines), so any process's calls are seen.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from typing import Any, TypedDict

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from signoff.langgraph import approval, ask


def record(name: str, args: dict[str, Any]) -> None:
    with open(os.environ["LG_CALLS"], "a") as f:
        f.write(json.dumps({"tool": name, "args": args}) + "\n")


def calls() -> list[dict[str, Any]]:
    path = os.environ["LG_CALLS"]
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


class ScriptedModel(GenericFakeChatModel):
    """Asks for the scripted tool calls until a tool answered, then sums up what the tools said."""

    tool_calls: list[dict[str, Any]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if results:
            text = " | ".join(f"{m.name}[{m.status}]: {m.content}" for m in results)
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=f"Done. {text}"))])
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="", tool_calls=self.tool_calls))])


@tool
def send_email(to: str, subject: str) -> str:
    """Send an email."""
    record("send_email", {"to": to, "subject": subject})
    return f"sent to {to}: {subject}"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    record("delete_file", {"path": path})
    return f"deleted {path}"


TWO_CALLS = [{"name": "send_email", "args": {"to": "a@example.com", "subject": "Hi"}, "id": "call_1"},
             {"name": "delete_file", "args": {"path": "/tmp/report.txt"}, "id": "call_2"}]
INTERRUPT_ON = {"send_email": True, "delete_file": {"allowed_decisions": ["approve", "reject", "respond"]}}


def hitl_agent(checkpointer: Any, mode: str = "batched") -> Any:
    """create_agent + HumanInTheLoopMiddleware gating both tools; the model calls both in one turn."""
    return create_agent(ScriptedModel(messages=iter(()), tool_calls=TWO_CALLS), tools=[send_email, delete_file],
                        checkpointer=checkpointer,
                        middleware=[HumanInTheLoopMiddleware(interrupt_on=INTERRUPT_ON, interrupt_mode=mode)])


def hitl_agent_per_call(checkpointer: Any) -> Any:
    return hitl_agent(checkpointer, "per_call")


# -- a hand-built graph whose tool node asks with approval() --------------------------------------


class State(TypedDict, total=False):
    request: str
    email: dict[str, Any]
    sent: dict[str, Any]


def plan(state: State) -> State:
    return {"email": {"to": "customer@example.com", "subject": "Your refund"}}


def tools(state: State) -> State:
    """The tool node: runs send_email with what the person approved (replays on resume)."""
    with open(os.environ["LG_CALLS"] + ".node-runs", "a") as f:
        f.write("run\n")  # counts the node's runs: it runs again from the top on resume
    # No client given: approval() makes one from SIGNOFF_URL / SIGNOFF_TOKEN, as an agent process has them.
    decision = approval("send_email", state["email"], summary=f"Email {state['email']['to']}",
                        channel="C1", approvers=["U1"],
                        params_schema={"type": "object", "properties": {"to": {"type": "string"},
                                                                       "subject": {"type": "string"}}})
    return {"sent": {"result": send_email.invoke(decision.params), "params": decision.params}}


def tool_graph(checkpointer: Any) -> Any:
    builder = StateGraph(State).add_node("plan", plan).add_node("tools", tools)
    return builder.add_edge(START, "plan").add_edge("plan", "tools").add_edge("tools", END).compile(
        checkpointer=checkpointer)


class Steps(TypedDict, total=False):
    approved: dict[str, Any]
    sent: str
    env: str
    deployed: str


def approve_step(state: Steps) -> Steps:
    decision = approval("send_email", {"to": "ops@example.com", "subject": "Release notes"}, channel="C1")
    return {"approved": decision.params}


def send_step(state: Steps) -> Steps:
    """Sends what was approved. With LG_BLOCK (a FIFO), blocks after recording: a resumer to kill mid-way;
    with LG_FAIL, raises that message after recording."""
    record("send_email", state["approved"])
    if os.environ.get("LG_FAIL"):
        raise RuntimeError(os.environ["LG_FAIL"])
    if os.environ.get("LG_BLOCK"):
        open(os.environ["LG_BLOCK"]).read()  # nobody writes: blocks until the process is killed
    return {"sent": "ok"}


def two_step_graph(checkpointer: Any) -> Any:
    """approval() in one node, the tool in the next: a resume can die after the interrupt is consumed."""
    builder = StateGraph(Steps).add_node("approve", approve_step).add_node("send", send_step)
    return builder.add_edge(START, "approve").add_edge("approve", "send").add_edge("send", END).compile(
        checkpointer=checkpointer)


def clarify(state: Steps) -> Steps:
    answers = ask([{"question": "Which environment?", "header": "Env", "options": ["staging", "production"]}],
                  summary="Deploy the release", channel="C1")
    return {"env": answers["Which environment?"].value}


def deploy(state: Steps) -> Steps:
    record("deploy", {"env": state["env"]})
    return {"deployed": state["env"]}


def question_graph(checkpointer: Any) -> Any:
    builder = StateGraph(Steps).add_node("clarify", clarify).add_node("deploy", deploy)
    return builder.add_edge(START, "clarify").add_edge("clarify", "deploy").add_edge("deploy", END).compile(
        checkpointer=checkpointer)


def release(state: Steps) -> Steps:
    """Two approvals in one node: on each resume the node replays and finds the ones it already made."""
    tag = approval("git_tag", {"tag": "v2.0"}, channel="C1")
    push = approval("git_push", {"remote": "origin", "tag": tag.params["tag"]}, channel="C1")
    record("release", push.params)
    return {"sent": push.params["tag"]}


def release_graph(checkpointer: Any) -> Any:
    return StateGraph(Steps).add_node("release", release).add_edge(START, "release").add_edge(
        "release", END).compile(checkpointer=checkpointer)


def saver(path: str) -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(path, check_same_thread=False))


if __name__ == "__main__":  # python -m tests.client.lg_graphs DB THREAD: start the graph, then exit
    graph = tool_graph(saver(sys.argv[1]))
    result = graph.invoke({"request": "refund"}, {"configurable": {"thread_id": sys.argv[2]}})
    print(json.dumps([i.value for i in result.get("__interrupt__", [])]))
