"""Claude's permission suggestions through the real clients: the Agent SDK's `can_use_tool` with the
bundled Claude Code CLI (which sends `ToolPermissionContext.suggestions` offline), and `signoff hook
claude-code` as a PermissionRequest hook, run by the real CLI and as a command fed hook input.

A person taps "Approve & always allow Bash(npm test *)": the call runs, Claude Code remembers the
rule (its settings file holds it), Signoff holds the grant, and the next matching call from the
same agent is approved by the grant without a card; a call outside the match still asks.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from bot.sandbox.model import message, text, tool_use
from signoff import AsyncSignoffClient
from signoff.claude import can_use_tool
from tests.fakes.claude_api import FakeClaudeApi
from tests.support.app import API_TOKEN, App, ROOT
from tests.client.claude_cli import ClaudeCli, run_sdk, signoff_command
from tests.support.docs import doc_example
from tests.client.helpers import cards, cards_once_posted, cards_once_settled, pending_id

POLICY = "rules:\n  - name: drops-are-critical\n    tool: drop_table\n    tier: critical\n"
NPM_RULE = {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test *"}], "behavior": "allow",
            "destination": "localSettings"}


pytestmark = pytest.mark.policy(POLICY)  # grants (and so suggestions) apply only under a policy file


def with_npm(cli: ClaudeCli) -> Path:
    """An `npm` on the CLI's PATH that only records its arguments: shows whether a call really ran."""
    log = cli.root / "npm.log"
    script = cli.bin / "npm"
    script.write_text(f"#!/bin/sh\necho \"$*\" >> '{log}'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return log


def bash_call(command: str, id: str) -> Any:
    return message(tool_use("Bash", {"command": command, "description": "Run the tests"}, id=id))


async def tap_suggestion(app: App, request_id: str, index: int = 0, user: str = "U1") -> None:
    card = await app.card(request_id)
    labels = [e["text"]["text"] for b in card.blocks if b["type"] == "actions" for e in b["elements"]
              if e["action_id"] == f"signoff_suggest_{index}"]
    assert labels == ["Approve & always allow Bash(npm test *)"], card.blocks
    await app.slack_client.block_action(user=user, user_name="alice", action_id=f"signoff_suggest_{index}",
                                        value=request_id, block_id="decide", channel=card.channel,
                                        message_ts=card.ts)


async def only_grant(app: App) -> dict[str, Any]:
    _, grants = await app.api("GET", "/api/v1/grants")
    [grant] = grants["items"]
    return dict(grant)


async def test_can_use_tool_hands_the_accepted_suggestion_back_and_the_grant_answers_next_time(
        papp: App, model: FakeClaudeApi, tmp_path: Path) -> None:
    cli = ClaudeCli(model, tmp_path / "first")
    ran = with_npm(cli)
    model.script(bash_call("npm test -- --ci", "toolu_sug_1"), message(text("Tested.")))
    async with AsyncSignoffClient(papp.url, API_TOKEN) as signoff:
        callback = can_use_tool(signoff, channel="C1", approvers=["U1"], session="sdk-one", cwd=str(cli.work))
        running = asyncio.create_task(run_sdk(cli, "run the tests", callback))
        request_id = await pending_id(papp)
        _, body = await papp.api("GET", f"/api/v1/approvals/{request_id}")
        # What the real CLI offered, as the SDK's PermissionUpdate turned into JSON, rode along.
        assert body["suggestions"] == [NPM_RULE]
        await tap_suggestion(papp, request_id)
        result = await running
    assert result.result == "Tested." and ran.read_text() == "test -- --ci\n"
    # updated_permissions reached Claude Code: it wrote the rule where the suggestion said.
    settings = json.loads((cli.work / ".claude" / "settings.local.json").read_text())
    assert settings["permissions"]["allow"] == ["Bash(npm test *)"]
    _, decided = await papp.api("GET", f"/api/v1/approvals/{request_id}")
    grant = await only_grant(papp)
    assert decided["decision"]["suggestion"] == {"index": 0, "update": NPM_RULE, "grant_ids": [grant["id"]]}
    assert (grant["tool"], grant["match"], grant["scope"], grant["scope_value"]) == (
        "Bash", {"command": {"op": "command", "value": "npm test *"}}, "agent", "token-1")  # the agent's token

    # A new project (Claude Code has no rule there), the same agent: the grant approves, no card.
    posted = cards(papp.slack)
    other = ClaudeCli(model, tmp_path / "second")
    ran_again = with_npm(other)
    model.reset()
    model.script(bash_call("npm test -- --watch=false", "toolu_sug_2"), message(text("Again.")))
    async with AsyncSignoffClient(papp.url, API_TOKEN) as signoff:
        result = await run_sdk(other, "test again", can_use_tool(signoff, channel="C1", session="sdk-two"))
    assert result.result == "Again." and ran_again.read_text() == "test -- --watch=false\n"
    _, listing = await papp.api("GET", "/api/v1/approvals")
    [latest] = [r for r in listing["items"] if r["id"] != request_id]
    assert latest["action"]["params"]["command"] == "npm test -- --watch=false"
    assert (latest["decision"]["via"], latest["decision"]["grant_id"]) == ("grant", grant["id"])
    assert await cards_once_settled(papp) == posted

    # Outside the match: asks (a card), and a rejection is a denial the model hears about.
    model.reset()
    model.script(bash_call("npm run lint", "toolu_sug_3"), message(text("Skipped.")))
    async with AsyncSignoffClient(papp.url, API_TOKEN) as signoff:
        running = asyncio.create_task(run_sdk(other, "lint", can_use_tool(signoff, channel="C1", session="sdk-3")))
        outside = await pending_id(papp)
        await papp.click(outside, "U1")  # a plain Approve: this once, no grant
        await running
    assert cards(papp.slack) == posted + 1 and ran_again.read_text().endswith("run lint\n")
    _, grants = await papp.api("GET", "/api/v1/grants")
    assert len(grants["items"]) == 1


def permission_request(session: str, command: str, cwd: Path, suggestions: list[Any]) -> dict[str, Any]:
    """Shaped like the fixtures (and like what the bundled CLI sends a PermissionRequest hook)."""
    return {"session_id": session, "transcript_path": str(cwd / "missing.jsonl"), "cwd": str(cwd),
            "permission_mode": "default", "hook_event_name": "PermissionRequest", "tool_name": "Bash",
            "tool_input": {"command": command, "description": "Run the tests"},
            "permission_suggestions": suggestions}


async def hook(app: App, payload: dict[str, Any], *args: str) -> dict[str, Any]:
    """`signoff hook claude-code ARGS` as Claude Code runs it: JSON on stdin, JSON on stdout, exit 0."""
    env = {**os.environ, "SIGNOFF_URL": app.url, "SIGNOFF_TOKEN": API_TOKEN, "SIGNOFF_CHANNEL": "C1",
           "SIGNOFF_APPROVERS": "U1,U2", "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        *signoff_command().split(), "hook", "claude-code", *args, env=env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(json.dumps(payload).encode()), 60)
    assert proc.returncode == 0, err.decode()
    return dict(json.loads(out.decode()))


async def test_the_hook_returns_the_accepted_suggestion_in_updated_permissions(papp: App, tmp_path: Path) -> None:
    session_rule = dict(NPM_RULE, destination="session")
    setmode = {"type": "setMode", "mode": "acceptEdits", "destination": "session"}
    running = asyncio.create_task(hook(papp, permission_request("sess-h1", "npm test -- --ci", tmp_path,
                                                                [setmode, session_rule]), "--wait", "30"))
    request_id = await pending_id(papp)
    await tap_suggestion(papp, request_id, index=1)
    answer = await running
    assert answer == {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {
        "behavior": "allow", "updatedInput": {"command": "npm test -- --ci", "description": "Run the tests"},
        "updatedPermissions": [session_rule]}}}
    grant = await only_grant(papp)
    assert (grant["scope"], grant["scope_value"]) == ("run", "session:token-1:sess-h1")

    # The same session, a matching command: allowed by the grant, no card, no updatedPermissions.
    posted = cards(papp.slack)
    again = await hook(papp, permission_request("sess-h1", "npm test -- -u", tmp_path, [session_rule]),
                       "--wait", "5")
    assert again["hookSpecificOutput"]["decision"]["behavior"] == "allow"
    assert "updatedPermissions" not in again["hookSpecificOutput"]["decision"]
    assert await cards_once_settled(papp) == posted
    _, listing = await papp.api("GET", "/api/v1/approvals")
    assert [r["decision"]["via"] for r in listing["items"] if r["action"]["params"]["command"] == "npm test -- -u"] \
        == ["grant"]

    # Another session, or a command outside the match: asks; unanswered, a PermissionRequest deny.
    for session, command in (("sess-h2", "npm test -- -u"), ("sess-h1", "npm publish")):
        denied = await hook(papp, permission_request(session, command, tmp_path, []), "--wait", "0.2")
        decision = denied["hookSpecificOutput"]["decision"]
        assert decision["behavior"] == "deny" and "still waiting for a decision" in decision["message"]
    _, waiting = await papp.api("GET", "/api/v1/approvals?status=pending")
    assert await cards_once_posted(papp, *[i["id"] for i in waiting["items"]]) == posted + 2


async def test_the_hook_never_offers_suggestions_on_critical_calls_and_fails_closed(papp: App,
                                                                                    tmp_path: Path) -> None:
    running = asyncio.create_task(hook(papp, permission_request("sess-c", "npm test", tmp_path, [NPM_RULE]),
                                       "--wait", "30", "--risk", "critical"))
    request_id = await pending_id(papp)
    card = await papp.card(request_id)
    assert not [e for b in card.blocks if b["type"] == "actions" for e in b["elements"]
                if e["action_id"].startswith("signoff_suggest_")]
    assert "critical requests are never remembered" in json.dumps(card.blocks, ensure_ascii=False)
    await papp.slack_client.block_action(user="U1", action_id="signoff_suggest_0", value=request_id,
                                         block_id="decide", channel=card.channel, message_ts=card.ts)
    notes = await papp.slack.wait_for("chat.postEphemeral")
    assert "cannot be accepted here" in notes[-1].args["text"]
    await papp.api("POST", f"/api/v1/approvals/{request_id}/cancel", json={"reason": "test over"})
    answer = await running
    assert answer["hookSpecificOutput"]["decision"]["behavior"] == "deny"
    _, grants = await papp.api("GET", "/api/v1/grants")
    assert grants["items"] == []

    # Bad input or no server: still a PermissionRequest-shaped deny (never a crash that lets it through).
    broken = {**permission_request("sess-x", "npm test", tmp_path, []), "tool_input": "not an object"}
    answer = await hook(papp, broken)
    assert answer["hookSpecificOutput"]["hookEventName"] == "PermissionRequest"
    assert answer["hookSpecificOutput"]["decision"]["behavior"] == "deny"


async def test_the_readme_permission_request_hook_in_the_real_cli_remembers_the_rule(
        papp: App, model: FakeClaudeApi, tmp_path: Path) -> None:
    cli = ClaudeCli(model, tmp_path, {"SIGNOFF_URL": papp.url, "SIGNOFF_TOKEN": API_TOKEN, "SIGNOFF_CHANNEL": "C1",
                                      "SIGNOFF_APPROVERS": "U1,U2"})
    ran = with_npm(cli)
    (cli.work / ".claude").mkdir()
    (cli.work / ".claude" / "settings.json").write_text(doc_example("claude-permission-request"))
    model.script(bash_call("npm test -- --ci", "toolu_pr_1"), bash_call("npm test -- --again", "toolu_pr_2"),
                 message(text("Both ran.")))
    running = asyncio.create_task(cli.run("run the tests twice"))
    request_id = await pending_id(papp)
    _, body = await papp.api("GET", f"/api/v1/approvals/{request_id}")
    assert body["suggestions"] == [NPM_RULE] and body["action"]["params"]["command"] == "npm test -- --ci"
    await tap_suggestion(papp, request_id)
    result = await running
    assert result["_exit"] == 0 and result["result"] == "Both ran.", result
    # Claude Code applied updatedPermissions: the second call matched its own new rule and never asked.
    assert ran.read_text() == "test -- --ci\ntest -- --again\n"
    assert json.loads((cli.work / ".claude" / "settings.local.json").read_text())["permissions"]["allow"] == [
        "Bash(npm test *)"]
    assert await cards_once_settled(papp) == 1
    grant = await only_grant(papp)
    assert grant["scope_value"] == "token-1"  # the hook's token, not its "Claude Code on <host>" label
    # PermissionRequest input has no tool_use_id: the hook found it in the transcript for the request's key.
    assert papp.signoff is not None
    stored = await papp.signoff.store.get_request(request_id)
    assert stored is not None and str(stored.idempotency_key).endswith(":toolu_pr_1")


async def test_a_suggestion_the_server_refuses_never_costs_the_approval(papp: App, tmp_path: Path) -> None:
    huge = dict(NPM_RULE, rules=[{"toolName": "Bash", "ruleContent": "npm test " + "x" * 3000}])
    running = asyncio.create_task(hook(papp, permission_request("sess-big", "npm test", tmp_path, [huge]),
                                       "--wait", "30"))
    request_id = await pending_id(papp)
    _, body = await papp.api("GET", f"/api/v1/approvals/{request_id}")
    assert "suggestions" not in body and "session" not in body  # asked again without them
    await papp.click(request_id, "U1", user_name="alice")
    answer = await running
    assert answer["hookSpecificOutput"]["decision"]["behavior"] == "allow"
    assert "updatedPermissions" not in answer["hookSpecificOutput"]["decision"]
