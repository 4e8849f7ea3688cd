"""What both of Claude Code's ways to ask Signoff must do, driven by the REAL Claude Code CLI against a fake
model and decided in Slack: the command hook (`signoff hook claude-code`, beside the agent's files) and the
HTTP hook (`"type": "http"`, the docs' snippet, answered by the server at POST /api/v1/hooks/claude-code).
Each scenario is written once and run through both; what only one of them does is in
test_claude_code_hook.py and test_claude_http_hook.py."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from bot.sandbox import SlackEmulator
from bot.sandbox.model import message, text, tool_use
from bot.sandbox.signed import plain_input
from tests.client.claude_hooks import Hook
from tests.client.helpers import cards, pending_id
from tests.fakes.claude_api import FakeClaudeApi
from tests.support.app import App, start_app

@pytest.fixture(params=["command", "http"])
def hook(request: pytest.FixtureRequest) -> Hook:
    return Hook(request.param)


@pytest_asyncio.fixture
async def deferring(hook: Hook, db_url: str, slack: SlackEmulator) -> AsyncIterator[App]:
    """The app a deferring hook asks: for the HTTP hook, one on the agents' machine, which may read the
    transcripts the hooks name (so it can tell a lone call, which may defer); the harness's own otherwise."""
    env = {"SIGNOFF_CLAUDE_TRANSCRIPTS": "read"} if hook.kind == "http" else {}
    running = await start_app(db_url, slack, **env)
    try:
        yield running
    finally:
        await running.stop()


async def test_edit_and_approve_in_slack_writes_the_edited_content(hook: Hook, app: App, model: FakeClaudeApi,
                                                                   tmp_path: Path) -> None:
    cli = hook.cli(app.url, model, tmp_path)
    target = cli.work / "config.yaml"
    target.write_text("replicas: 2\n")
    model.script(message(text("Scaling up."), tool_use("Write", {"file_path": str(target), "content": "replicas: 9\n"},
                                                       id=f"toolu_{hook.kind}_write")),
                 message(text("Done.")))
    running = asyncio.create_task(cli.run("scale to 9", "--settings", hook.settings(app, wait="60")))
    request_id = await pending_id(app)
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    # The card shows the change (against what is on disk, where the hook can read it), and who asked from where.
    assert body["summary"] == "Claude Code wants to write config.yaml" and body["approvers"] == ["U1", "U2"]
    assert "+replicas: 9" in body["preview"]["unified"]
    if hook.reads_the_agents_disk:
        assert body["preview"]["kind"] == "diff" and "-replicas: 2" in body["preview"]["unified"]
        assert socket.gethostname() in body["context"]
    else:
        assert "replicas: 2" not in json.dumps(body["preview"])  # the proposal; the server never reads the disk
    assert "Claude Code session " in body["context"] and str(cli.work) in body["context"]
    assert body["action"]["params_schema"]["required"] == ["file_path", "content"]
    card = await app.card(request_id)
    assert "replicas: 9" in json.dumps(card.blocks)

    await app.click(request_id, "U1", action="signoff_edit", user_name="alice")
    [opened] = await app.slack.wait_for("views.open")
    await app.slack_client.view_submission(user="U1", user_name="alice", callback_id="signoff_edit",
                                           private_metadata=opened.args["view"]["private_metadata"],
                                           values={"p:content": {"value": plain_input("replicas: 3\n")}})
    result = await running
    assert result["_exit"] == 0 and result["result"] == "Done.", result
    assert target.read_text() == "replicas: 3\n"  # the person's content, not the model's
    [tool_result] = model.tool_results(1)
    assert not tool_result.get("is_error")
    assert cards(app.slack) == 1


async def test_a_rejection_reaches_the_model_and_nothing_is_written(hook: Hook, app: App, model: FakeClaudeApi,
                                                                    tmp_path: Path) -> None:
    cli = hook.cli(app.url, model, tmp_path)
    target = cli.work / "notes.txt"
    call_id = f"toolu_{hook.kind}_reject"
    model.script(message(tool_use("Write", {"file_path": str(target), "content": "x\n"}, id=call_id)),
                 message(text("Understood.")))
    running = asyncio.create_task(cli.run("write notes", "--permission-mode", "acceptEdits", "--settings",
                                          hook.settings(app, wait="60")))
    request_id = await pending_id(app)
    await app.click(request_id, "U2", action="signoff_reject", user_name="bob")
    [opened] = await app.slack.wait_for("views.open")
    await app.slack_client.view_submission(user="U2", user_name="bob", callback_id="signoff_reject",
                                           private_metadata=opened.args["view"]["private_metadata"],
                                           values={"reason": {"value": plain_input("Keep notes in the wiki")}})
    result = await running
    assert result["_exit"] == 0 and not target.exists()  # acceptEdits would have written it: the hook denied
    [tool_result] = model.tool_results(1)
    assert tool_result.get("is_error") and "Keep notes in the wiki" in json.dumps(tool_result)
    assert "bob" in json.dumps(tool_result)
    assert [d["tool_use_id"] for d in result["permission_denials"]] == [call_id]


async def test_defer_then_a_click_then_resume_runs_the_call_once(hook: Hook, deferring: App, model: FakeClaudeApi,
                                                                 tmp_path: Path) -> None:
    app = deferring
    cli = hook.cli(app.url, model, tmp_path)
    target = cli.work / "release.txt"
    target.write_text("v1\n")
    call_id = f"toolu_{hook.kind}_defer"
    settings = hook.settings(app, wait="0.5", defer=True)
    model.script(message(tool_use("Write", {"file_path": str(target), "content": "v2\n"}, id=call_id)))
    first = await cli.run("write the release note", "--settings", settings)
    assert first["_exit"] == 0 and first["terminal_reason"] == "tool_deferred", first
    assert first["deferred_tool_use"]["id"] == call_id and target.read_text() == "v1\n"
    request_id = await pending_id(app)
    await app.click(request_id, "U1", user_name="alice")
    _, decided = await app.api("GET", f"/api/v1/approvals/{request_id}?wait=10")
    assert decided["status"] == "approved"

    # Resumed as it was: the same call finds the same request and its approval, and runs once.
    model.script(message(text("Written.")), message(text("Nothing else.")))
    resumed = await cli.run("carry on", "--resume", first["session_id"], "--settings", settings)
    assert resumed["_exit"] == 0 and resumed["terminal_reason"] == "completed", resumed
    assert target.read_text() == "v2\n"
    ran = [r for r in model.tool_results(-1) if r["tool_use_id"] == call_id]
    assert len(ran) == 1 and not ran[0].get("is_error")
    _, listing = await app.api("GET", "/api/v1/approvals")
    assert [i["id"] for i in listing["items"]] == [request_id]
    assert cards(app.slack) == 1


async def test_calls_the_cli_would_lose_are_denied_instead_of_deferred(hook: Hook, deferring: App,
                                                                       model: FakeClaudeApi, tmp_path: Path) -> None:
    app = deferring
    cli = hook.cli(app.url, model, tmp_path)
    a, b = cli.work / "a.txt", cli.work / "b.txt"
    model.script(message(tool_use("Write", {"file_path": str(a), "content": "A\n"}, id=f"toolu_{hook.kind}_two_a"),
                         tool_use("Write", {"file_path": str(b), "content": "B\n"}, id=f"toolu_{hook.kind}_two_b")),
                 message(text("Both were held back.")))
    settings = hook.settings(app, wait="0.5", defer=True)
    two = await cli.run("write both", "--settings", settings)
    assert two["terminal_reason"] == "completed" and not a.exists() and not b.exists(), two
    results = model.tool_results(1)
    assert len(results) == 2 and all(r.get("is_error") for r in results)
    assert all("several tool calls" in json.dumps(r) and "still waiting" in json.dumps(r) for r in results)

    # A resumed call that is still undecided is denied, never deferred a second time.
    model.reset()
    c = cli.work / "c.txt"
    again_id = f"toolu_{hook.kind}_again"
    model.script(message(tool_use("Write", {"file_path": str(c), "content": "C\n"}, id=again_id)))
    first = await cli.run("write c", "--settings", settings)
    assert first["terminal_reason"] == "tool_deferred", first
    model.script(message(text("Still held.")), message(text("OK.")))
    again = await cli.run("carry on", "--resume", first["session_id"], "--settings", settings)
    assert again["terminal_reason"] == "completed" and not c.exists(), again
    [held] = [r for r in model.tool_results(1) if r["tool_use_id"] == again_id]
    assert held.get("is_error") and "still waiting" in json.dumps(held)
