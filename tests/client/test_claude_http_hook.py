"""Claude Code's HTTP hook (`"type": "http"`), the docs' snippet, driven by the REAL bundled CLI against a
fake model and answered by the server at POST /api/v1/hooks/claude-code: what only the HTTP hook does (what both
hooks do is in test_claude_hooks.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any


from bot.sandbox import SlackEmulator
from bot.sandbox.model import message, text, tool_use
from tests.fakes.claude_api import FakeClaudeApi
from bench.harness import free_port
from tests.client.claude_cli import ClaudeCli
from tests.client.claude_hooks import DOCS_SERVER, http_settings
from tests.client.helpers import cards, pending_id
from tests.support.outbox import settle
from tests.support.app import API_TOKEN, App, policy_app
from tests.support.docs import doc_example

def cli_for(model: FakeClaudeApi, tmp_path: Path, token: str = API_TOKEN) -> ClaudeCli:
    # Only the token: the HTTP hook reads nothing else from the environment (SIGNOFF_URL is not set).
    return ClaudeCli(model, tmp_path, {"SIGNOFF_TOKEN": token})


POLICY = """
rules:
  - name: tests-are-fine
    tool: Bash
    params: {command: {regex: "^echo "}}
    effect: allow
    tier: low
"""


async def test_a_call_policy_allows_runs_with_no_card(db_url: str, slack: SlackEmulator, model: FakeClaudeApi,
                                                      tmp_path: Path) -> None:
    async with policy_app(db_url, slack, tmp_path, POLICY) as app:
        cli = cli_for(model, tmp_path)
        target = cli.work / "out.txt"
        model.script(message(tool_use("Bash", {"command": f"echo ok > {target}"}, id="toolu_http_allowed")),
                     message(text("Ran it.")))
        result = await cli.run("say ok", "--settings", http_settings(app.url, "&channel=C1"))
        assert result["_exit"] == 0 and result["result"] == "Ran it.", result
        assert target.read_text() == "ok\n"
        assert app.signoff is not None
        await app.signoff.dispatcher.drain()
        assert cards(slack) == 0
        _, listing = await app.api("GET", "/api/v1/approvals")
        [allowed] = listing["items"]
        assert allowed["status"] == "approved" and allowed["decision"]["via"] == "policy"


async def blocked_write(cli: ClaudeCli, model: FakeClaudeApi, settings: str, call_id: str) -> dict[str, Any]:
    """A Write under acceptEdits (which would let it happen) through `settings`: the run's result."""
    target = cli.work / f"{call_id}.txt"
    model.script(message(tool_use("Write", {"file_path": str(target), "content": "x\n"}, id=call_id)),
                 message(text("OK.")))
    result = await cli.run("write it", "--permission-mode", "acceptEdits", "--settings", settings)
    assert result["_exit"] == 0 and not target.exists(), result  # blocked
    assert [d["tool_use_id"] for d in result["permission_denials"]] == [call_id], result
    [tool_result] = [r for r in model.tool_results(-1) if r["tool_use_id"] == call_id]
    assert tool_result.get("is_error"), tool_result
    return tool_result


async def test_server_down_bad_token_and_slow_server_all_block_the_call(app: App, model: FakeClaudeApi,
                                                                       tmp_path: Path) -> None:
    down = cli_for(model, tmp_path / "down")
    await blocked_write(down, model, http_settings(f"http://127.0.0.1:{free_port()}"), "toolu_http_down")

    model.reset()
    wrong = cli_for(model, tmp_path / "token", token="not-a-token")
    refused = await blocked_write(wrong, model, http_settings(app.url, "&channel=C1"), "toolu_http_token")
    said = json.dumps(refused)  # a deny with the reason and what to set, not only a block
    assert "does not know the hook's bearer token" in said and 'allowedEnvVars' in said, said

    model.reset()  # nobody decides within the hook's own 2 s timeout: Claude Code gives up on the server
    slow = cli_for(model, tmp_path / "slow")
    await blocked_write(slow, model, http_settings(app.url, "&channel=C1&wait=30", timeout=2), "toolu_http_slow")
    _, listing = await app.api("GET", "/api/v1/approvals?status=pending")
    assert len(listing["items"]) == 1  # its card is still there for a person; the call did not wait for it


async def test_without_the_transcript_the_server_denies_rather_than_defer(app: App, model: FakeClaudeApi,
                                                                          tmp_path: Path) -> None:
    cli = cli_for(model, tmp_path)
    target = cli.work / "x.txt"
    model.script(message(tool_use("Write", {"file_path": str(target), "content": "x\n"}, id="toolu_http_unread")),
                 message(text("OK.")))
    result = await cli.run("write x", "--settings", http_settings(app.url, "&channel=C1&on_timeout=defer&wait=0.2"))
    assert result["terminal_reason"] == "completed" and not target.exists(), result
    [held] = model.tool_results(1)
    assert held.get("is_error") and "cannot tell how many tool calls" in json.dumps(held)


NPM_RULE = {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test *"}], "behavior": "allow",
            "destination": "localSettings"}


async def test_as_a_permission_request_hook_an_accepted_suggestion_becomes_claude_codes_rule(
        db_url: str, slack: SlackEmulator, model: FakeClaudeApi, tmp_path: Path) -> None:
    async with policy_app(db_url, slack, tmp_path, "rules:\n  - name: drops\n    tool: drop_table\n    tier: critical\n",
                          SIGNOFF_CLAUDE_TRANSCRIPTS="read") as app:
        cli = cli_for(model, tmp_path)
        ran = cli.root / "npm.log"
        (cli.bin / "npm").write_text(f"#!/bin/sh\necho \"$*\" >> '{ran}'\n")
        (cli.bin / "npm").chmod(0o755)
        model.script(message(tool_use("Bash", {"command": "npm test -- --ci", "description": "Run"}, id="toolu_http_pr_1")),
                     message(tool_use("Bash", {"command": "npm test -- --again", "description": "Run"},
                                      id="toolu_http_pr_2")),
                     message(text("Both ran.")))
        settings = http_settings(app.url, "&channel=C1&approvers=U1,U2", event="PermissionRequest")
        running = asyncio.create_task(cli.run("run the tests twice", "--settings", settings))
        request_id = await pending_id(app)
        _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
        assert body["suggestions"] == [NPM_RULE] and body["action"]["params"]["command"] == "npm test -- --ci"
        card = await app.card(request_id)
        await app.slack_client.block_action(user="U1", user_name="alice", action_id="signoff_suggest_0",
                                            value=request_id, block_id="decide", channel=card.channel,
                                            message_ts=card.ts)
        result = await running
        assert result["_exit"] == 0 and result["result"] == "Both ran.", result
        # Claude Code applied updatedPermissions: the second call matched its own new rule and never asked.
        assert ran.read_text() == "test -- --ci\ntest -- --again\n"
        assert json.loads((cli.work / ".claude" / "settings.local.json").read_text())["permissions"]["allow"] == [
            "Bash(npm test *)"]
        assert cards(slack) == 1
        assert app.signoff is not None  # no tool_use_id in a PermissionRequest: found in the transcript
        stored = await app.signoff.store.get_request(request_id)
        assert stored is not None and str(stored.idempotency_key).endswith(":toolu_http_pr_1")


async def test_post_tool_use_reports_what_ran_to_the_card_and_the_audit(app: App, model: FakeClaudeApi,
                                                                          tmp_path: Path) -> None:
    """The docs' HTTP PostToolUse hook beside the PreToolUse one: the receipt reaches the card and the audit."""
    cli = cli_for(model, tmp_path)
    target = cli.work / "config.yaml"
    target.write_text("replicas: 2\n")
    model.script(message(text("Scaling."), tool_use("Write", {"file_path": str(target), "content": "replicas: 9\n"},
                                                    id="toolu_http_post")),
                 message(text("Done.")))
    settings = json.loads(http_settings(app.url, "&channel=C1&approvers=U1,U2"))
    post = json.loads(doc_example("claude-http-receipts"))["hooks"]["PostToolUse"]
    post[0]["hooks"][0]["url"] = post[0]["hooks"][0]["url"].replace(DOCS_SERVER, app.url)
    settings["hooks"]["PostToolUse"] = post
    running = asyncio.create_task(cli.run("scale to 9", "--settings", json.dumps(settings)))
    request_id = await pending_id(app)
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert body.get("state") is None  # the server never reads the agent's disk: nothing to bind the approval to
    await app.click(request_id, "U1", user_name="alice")
    result = await running
    assert result["_exit"] == 0 and result["result"] == "Done.", result
    assert target.read_text() == "replicas: 9\n"

    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert body["outcome_status"] == "ran" and body["outcome"]["same_params"] is True, body
    assert body["outcome"]["params"] == {"file_path": str(target), "content": "replicas: 9\n"}
    await settle(app)
    card = await app.card(request_id)
    said = card.text + "\n" + json.dumps(card.blocks, ensure_ascii=False)
    assert "with the approved parameters" in said, said
    assert app.signoff is not None
    assert [e.type for e in await app.signoff.store.audit_events(request_id)].count("run_ran") == 1
