"""The LangGraph page's (docs/integrations/langgraph.md) examples, run as written: each file started as a
program that pauses and exits, then resumed by the page's `signoff langgraph resume` lines in another
process, started in the app's folder with no PYTHONPATH (as a person runs them)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.sandbox.signed import plain_input
from tests.support.app import API_TOKEN, App
from tests.support.docs import doc_example
from tests.approvals.batch_steps import approve_selected, controls, item_state, open_item, submit
from tests.client.test_langgraph import decided, submit_modal
from tests.support.waits import until

@pytest.fixture
def workdir(app: App, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """An application directory and the environment its processes run with."""
    app.slack.add_channel("C0123ABCD", "approvals")
    app.slack.add_user("U0123ALICE", "alice")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(SIGNOFF_URL=app.url, SIGNOFF_TOKEN=API_TOKEN, SIGNOFF_CHANNEL="C0123ABCD",
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    return tmp_path, env


async def pending(app: App, count: int) -> list[dict[str, Any]]:
    async def landed() -> list[dict[str, Any]] | None:
        _, listing = await app.api("GET", "/api/v1/approvals?status=pending")
        return list(listing["items"]) if len(listing["items"]) >= count else None

    return await until(landed, f"the agent process's {count} request(s) to be pending")


async def start(command: list[str] | str, cwd: Path, env: dict[str, str]) -> asyncio.subprocess.Process:
    if isinstance(command, str):  # a README line, run by the shell as written (exec: signals reach it)
        return await asyncio.create_subprocess_shell("exec " + command, cwd=cwd, env=env)
    return await asyncio.create_subprocess_exec(*command, cwd=cwd, env=env)


async def finish(proc: asyncio.subprocess.Process) -> int:
    if proc.returncode is None:
        proc.terminate()
    return await proc.wait()


def state_of(path: Path, factory: str, thread_id: str) -> Any:
    from langgraph.checkpoint.sqlite import SqliteSaver

    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    saver = SqliteSaver(sqlite3.connect(path.parent / "checkpoints.db", check_same_thread=False))
    return getattr(module, factory)(saver).get_state({"configurable": {"thread_id": thread_id}})


async def test_the_node_example_pauses_exits_and_resumes_with_the_edit(app: App,
                                                                       workdir: tuple[Path, dict[str, str]]) -> None:
    tmp, env = workdir
    (tmp / "myapp.py").write_text(doc_example("langgraph-node"))
    assert await (await start([sys.executable, "myapp.py"], tmp, env)).wait() == 0
    [request] = await pending(app, 1)
    assert request["channel"] == "C0123ABCD" and request["action"]["name"] == "send_email"
    await submit_modal(app, request["id"], "signoff_edit", {
        "p:to": {"value": plain_input("customer@example.com")},
        "p:subject": {"value": plain_input("Your refund of $45")}})
    node_line = doc_example("langgraph-resume").splitlines()[0]
    resumer = await start(node_line, tmp, env)
    try:
        await until(lambda: bool(state_of(tmp / "myapp.py", "build_graph", "refund-1234").values.get("sent")),
                    timeout=60)
    finally:
        assert await finish(resumer) == 0
    state = state_of(tmp / "myapp.py", "build_graph", "refund-1234")
    assert state.values["sent"] == "sent to customer@example.com: Your refund of $45"


async def test_the_hitl_example_offers_each_tool_its_decisions_and_resumes(
        app: App, workdir: tuple[Path, dict[str, str]]) -> None:
    tmp, env = workdir
    (tmp / "agentapp.py").write_text(doc_example("langchain-hitl"))
    assert await (await start([sys.executable, "agentapp.py"], tmp, env)).wait() == 0
    [batch] = await pending(app, 1)  # one interrupt with two actions: one card
    assert [i["action"]["name"] for i in batch["items"]] == ["send_email", "delete_file"]
    card = await app.card(batch["id"])
    assert len(app.slack.calls_to("chat.postMessage")) == 1
    assert controls(card, 0) == ["signoff_item_pick", "signoff_item_edit", "signoff_item_reject",
                                 "signoff_item_respond"]
    assert controls(card, 1) == ["signoff_item_pick", "signoff_item_reject"]  # no Edit
    view = await open_item(app, batch["id"], 1, "signoff_item_reject", user="U0123ALICE")
    await submit(app, view, {"reason": {"value": plain_input("Keep the report")}}, user="U0123ALICE")
    await item_state(app, batch["id"], 1)
    await approve_selected(app, batch["id"], [0], user="U0123ALICE")
    await decided(app, batch["id"])
    hitl_line = doc_example("langgraph-resume").splitlines()[1]
    resumer = await start(hitl_line, tmp, env)
    try:
        await until(lambda: not state_of(tmp / "agentapp.py", "build_agent", "tidy-42").next, timeout=60)
    finally:
        assert await finish(resumer) == 0
    final = state_of(tmp / "agentapp.py", "build_agent", "tidy-42").values["messages"][-1]
    assert "send_email: sent to customer@example.com: Tidied" in final.content  # approved: the tool ran
    assert "delete_file: User rejected the tool call for `delete_file` with reason: Keep the report" in final.content
    assert "deleted" not in final.content
