"""`signoff hook claude-code` driven by the REAL Claude Code CLI against a fake model, decided in Slack: what only
the command hook does (what both hooks do is in test_claude_hooks.py)."""

from __future__ import annotations

import json
from pathlib import Path

from bot.sandbox.model import message, text, tool_use
from tests.fakes.claude_api import FakeClaudeApi
from tests.support.app import App
from bench.harness import free_port
from tests.client.claude_cli import ClaudeCli, hook_settings
from tests.client.claude_hooks import Hook
from tests.client.helpers import cards_once_posted, next_pending, pending_id


def cli_for(app_url: str, model: FakeClaudeApi, tmp_path: Path) -> ClaudeCli:
    return Hook("command").cli(app_url, model, tmp_path)


async def test_server_unreachable_is_a_denial_with_a_reason(model: FakeClaudeApi, tmp_path: Path) -> None:
    cli = cli_for(f"http://127.0.0.1:{free_port()}", model, tmp_path)
    target = cli.work / "x.txt"
    model.script(message(tool_use("Write", {"file_path": str(target), "content": "x\n"}, id="toolu_write_3")),
                 message(text("OK.")))
    result = await cli.run("write x", "--permission-mode", "acceptEdits",
                           "--settings", hook_settings("--wait", "5"))
    assert result["_exit"] == 0 and not target.exists()  # acceptEdits would have written it: the hook denied
    [tool_result] = model.tool_results(1)
    assert tool_result.get("is_error") and "could not get a decision" in json.dumps(tool_result)
    assert "SignoffUnavailable" in json.dumps(tool_result)


async def test_a_file_changed_before_the_resume_is_asked_again_not_deferred_again(app: App, model: FakeClaudeApi,
                                                                                  tmp_path: Path) -> None:
    cli = cli_for(app.url, model, tmp_path)
    target = cli.work / "release.txt"
    target.write_text("v1\n")
    model.script(message(tool_use("Write", {"file_path": str(target), "content": "v2\n"}, id="toolu_defer_2")))
    first = await cli.run("write the release note", "--settings",
                          hook_settings("--wait", "0.5", "--on-timeout", "defer"))
    assert first["terminal_reason"] == "tool_deferred", first
    request_id = await pending_id(app)
    await app.click(request_id, "U1", user_name="alice")
    _, decided = await app.api("GET", f"/api/v1/approvals/{request_id}?wait=10")
    assert decided["status"] == "approved"
    # The file changes after the approval (issue 37): the approval was made on the old file, so the resumed
    # call is asked again with the new preview; still undecided, it is denied (a second defer would lose it).
    target.write_text("v1, edited by hand\n")
    model.script(message(text("Held back.")), message(text("Nothing else.")))
    resumed = await cli.run("carry on", "--resume", first["session_id"], "--settings",
                            hook_settings("--wait", "0.5", "--on-timeout", "defer"))
    assert resumed["_exit"] == 0 and resumed["terminal_reason"] == "completed", resumed
    assert target.read_text() == "v1, edited by hand\n"
    [denied] = [r for r in model.tool_results(-1) if r["tool_use_id"] == "toolu_defer_2"]
    assert denied.get("is_error") and "file changed since it was approved" in json.dumps(denied)
    _, first_body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert first_body["outcome_status"] == "skipped"
    pending = await next_pending(app, request_id)
    assert pending != request_id and await cards_once_posted(app, request_id, pending) == 2


