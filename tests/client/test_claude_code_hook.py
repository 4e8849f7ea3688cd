"""`signoff hook claude-code` driven by the REAL Claude Code CLI against a fake model, decided in Slack."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

from bot.sandbox.model import message, text, tool_use
from tests.fakes.claude_api import FakeClaudeApi
from bot.sandbox.signed import plain_input
from tests.support.app import API_TOKEN, App
from bench.harness import free_port
from tests.client.claude_cli import ClaudeCli, hook_settings
from tests.client.helpers import cards, cards_once_posted, next_pending, pending_id


def cli_for(app_url: str, model: FakeClaudeApi, tmp_path: Path) -> ClaudeCli:
    return ClaudeCli(model, tmp_path, {"SIGNOFF_URL": app_url, "SIGNOFF_TOKEN": API_TOKEN, "SIGNOFF_CHANNEL": "C1",
                                       "SIGNOFF_APPROVERS": "U1,U2"})


async def open_modal(app: App, request_id: str, action: str, user: str = "U1") -> dict:
    await app.click(request_id, user, action=action, user_name={"U1": "alice", "U2": "bob"}[user])
    [opened] = await app.slack.wait_for("views.open")
    return opened.args["view"]


async def test_edit_and_approve_in_slack_writes_the_edited_content(app: App, model: FakeClaudeApi,
                                                                   tmp_path: Path) -> None:
    cli = cli_for(app.url, model, tmp_path)
    target = cli.work / "config.yaml"
    target.write_text("replicas: 2\n")
    model.script(message(text("Scaling up."), tool_use("Write", {"file_path": str(target), "content": "replicas: 9\n"},
                                                       id="toolu_write_1")),
                 message(text("Done.")))
    running = asyncio.create_task(cli.run("scale to 9", "--settings", hook_settings("--wait", "60")))
    request_id = await pending_id(app)
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    # The card shows the change against what is on disk, and who asked from where.
    assert body["preview"]["kind"] == "diff" and "-replicas: 2" in body["preview"]["unified"]
    assert "+replicas: 9" in body["preview"]["unified"]
    assert body["summary"] == "Claude Code wants to write config.yaml"
    assert str(cli.work) in body["context"] and socket.gethostname() in body["context"]
    assert "Claude Code session " in body["context"] and body["approvers"] == ["U1", "U2"]
    assert body["action"]["params_schema"]["required"] == ["file_path", "content"]
    card = await app.card(request_id)
    assert "replicas: 9" in json.dumps(card.blocks)

    view = await open_modal(app, request_id, "signoff_edit")
    await app.slack_client.view_submission(user="U1", user_name="alice", callback_id="signoff_edit",
                                           private_metadata=view["private_metadata"],
                                           values={"p:content": {"value": plain_input("replicas: 3\n")}})
    result = await running
    assert result["_exit"] == 0 and result["result"] == "Done.", result
    assert target.read_text() == "replicas: 3\n"  # the person's content, not the model's
    [tool_result] = model.tool_results(1)
    assert not tool_result.get("is_error")
    assert cards(app.slack) == 1


async def test_a_rejection_reaches_the_model_and_nothing_is_written(app: App, model: FakeClaudeApi,
                                                                    tmp_path: Path) -> None:
    cli = cli_for(app.url, model, tmp_path)
    target = cli.work / "notes.txt"
    model.script(message(tool_use("Write", {"file_path": str(target), "content": "x\n"}, id="toolu_write_2")),
                 message(text("Understood.")))
    running = asyncio.create_task(cli.run("write notes", "--settings", hook_settings("--wait", "60")))
    request_id = await pending_id(app)
    view = await open_modal(app, request_id, "signoff_reject", user="U2")
    await app.slack_client.view_submission(user="U2", user_name="bob", callback_id="signoff_reject",
                                           private_metadata=view["private_metadata"],
                                           values={"reason": {"value": plain_input("Keep notes in the wiki")}})
    result = await running
    assert result["_exit"] == 0 and not target.exists()
    [tool_result] = model.tool_results(1)
    assert tool_result.get("is_error") and "Keep notes in the wiki" in json.dumps(tool_result)
    assert "bob" in json.dumps(tool_result)
    assert [d["tool_use_id"] for d in result["permission_denials"]] == ["toolu_write_2"]


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


async def test_defer_then_a_click_then_resume_runs_the_call_once(app: App, model: FakeClaudeApi,
                                                                 tmp_path: Path) -> None:
    cli = cli_for(app.url, model, tmp_path)
    target = cli.work / "release.txt"
    target.write_text("v1\n")
    model.script(message(tool_use("Write", {"file_path": str(target), "content": "v2\n"}, id="toolu_defer_1")))
    first = await cli.run("write the release note", "--settings",
                          hook_settings("--wait", "0.5", "--on-timeout", "defer"))
    assert first["_exit"] == 0 and first["terminal_reason"] == "tool_deferred", first
    assert first["deferred_tool_use"]["id"] == "toolu_defer_1" and target.read_text() == "v1\n"
    request_id = await pending_id(app)
    await app.click(request_id, "U1", user_name="alice")
    _, decided = await app.api("GET", f"/api/v1/approvals/{request_id}?wait=10")
    assert decided["status"] == "approved"

    # Resumed as it was: the same call finds the same request and its approval, and runs once.
    model.script(message(text("Written.")), message(text("Nothing else.")))
    resumed = await cli.run("carry on", "--resume", first["session_id"], "--settings",
                            hook_settings("--wait", "0.5", "--on-timeout", "defer"))
    assert resumed["_exit"] == 0 and resumed["terminal_reason"] == "completed", resumed
    assert target.read_text() == "v2\n"
    ran = [r for r in model.tool_results(-1) if r["tool_use_id"] == "toolu_defer_1"]
    assert len(ran) == 1 and not ran[0].get("is_error")
    _, listing = await app.api("GET", "/api/v1/approvals")
    assert [i["id"] for i in listing["items"]] == [request_id]
    assert cards(app.slack) == 1


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


async def test_calls_the_cli_would_lose_are_denied_instead_of_deferred(app: App, model: FakeClaudeApi,
                                                                       tmp_path: Path) -> None:
    cli = cli_for(app.url, model, tmp_path)
    a, b = cli.work / "a.txt", cli.work / "b.txt"
    model.script(message(tool_use("Write", {"file_path": str(a), "content": "A\n"}, id="toolu_two_a"),
                         tool_use("Write", {"file_path": str(b), "content": "B\n"}, id="toolu_two_b")),
                 message(text("Both were held back.")))
    settings = hook_settings("--wait", "0.5", "--on-timeout", "defer")
    two = await cli.run("write both", "--settings", settings)
    assert two["terminal_reason"] == "completed" and not a.exists() and not b.exists(), two
    results = model.tool_results(1)
    assert len(results) == 2 and all(r.get("is_error") for r in results)
    assert all("several tool calls" in json.dumps(r) and "still waiting" in json.dumps(r) for r in results)

    # A resumed call that is still undecided is denied, never deferred a second time.
    model.reset()
    c = cli.work / "c.txt"
    model.script(message(tool_use("Write", {"file_path": str(c), "content": "C\n"}, id="toolu_again")))
    first = await cli.run("write c", "--settings", settings)
    assert first["terminal_reason"] == "tool_deferred", first
    model.script(message(text("Still held.")), message(text("OK.")))
    again = await cli.run("carry on", "--resume", first["session_id"], "--settings", settings)
    assert again["terminal_reason"] == "completed" and not c.exists(), again
    [held] = [r for r in model.tool_results(1) if r["tool_use_id"] == "toolu_again"]
    assert held.get("is_error") and "still waiting" in json.dumps(held)
