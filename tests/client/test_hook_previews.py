"""The hook on the documented sample inputs: what each tool's card shows, and its answers without a decision."""

from __future__ import annotations

import asyncio
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from signoff import hook
from signoff.claude_tools import preview
from bot.sandbox import SlackEmulator
from bot.slack.delivery import CARD_EVENT_TYPE
from tests.support.app import API_TOKEN, ROOT, App, start_app

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "claude-code"
SAMPLES = {
    "pre_tool_use_bash_rm.json": {"session_id": "s-bash", "cwd": "/home/dev/acme", "tool_name": "Bash",
                                  "tool_input": {"command": "rm -rf build/ dist/",
                                                 "description": "Remove build artifacts"},
                                  "tool_use_id": "toolu_01HkX9aBcDeFgH", "hook_event_name": "PreToolUse"},
    "pre_tool_use_mcp_email.json": {"session_id": "s-mcp", "cwd": "/home/dev/crm",
                                    "tool_name": "mcp__gmail__send_email",
                                    "tool_input": {"to": ["ceo@acme.com"], "subject": "Renewal terms",
                                                   "body": "Hi Dana,\n\nAttached are the terms.\n"},
                                    "tool_use_id": "toolu_01ZzYyXxWwVvUu", "hook_event_name": "PreToolUse"},
}


def sample(name: str) -> dict[str, Any]:
    """The shared sample when present, else the same documented fields written here."""
    path = FIXTURES / name
    return json.loads(path.read_text()) if path.exists() else SAMPLES[name]


def run_hook(stdin: str, *argv: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    code = hook.run(list(argv), stdin=io.StringIO(stdin), stdout=out)
    return code, json.loads(out.getvalue())


async def test_bash_and_mcp_cards_and_the_answers_when_nobody_decides(app: App) -> None:
    args = ("--url", app.url, "--token", API_TOKEN, "--channel", "C1", "--wait", "0.2")
    code, bash = await asyncio.to_thread(run_hook, json.dumps(sample("pre_tool_use_bash_rm.json")), *args)
    assert code == 0 and bash["hookSpecificOutput"]["permissionDecision"] == "deny"
    said = bash["hookSpecificOutput"]["permissionDecisionReason"]
    # What is left of the hook's wait when the server is asked (0.19...) reads as a person would say it.
    assert "still waiting for a decision" in said and re.search(r"within 0(\.\d{1,2})?s;", said), said
    code, asked = await asyncio.to_thread(run_hook, json.dumps(sample("pre_tool_use_mcp_email.json")), *args,
                                          "--on-timeout", "ask")
    assert code == 0 and asked["hookSpecificOutput"]["permissionDecision"] == "ask"
    _, listing = await app.api("GET", "/api/v1/approvals")
    by_tool = {i["action"]["name"]: i for i in listing["items"]}
    shell = by_tool["Bash"]
    assert shell["summary"] == "Claude Code wants to run: rm -rf build/ dist/"
    assert shell["preview"]["kind"] == "markdown" and "rm -rf build/ dist/" in shell["preview"]["text"]
    assert "Remove build artifacts" in shell["preview"]["text"] and "/home/dev/acme" in shell["preview"]["text"]
    assert shell["action"]["params_schema"]["properties"]["command"] == {"type": "string"}
    mail = by_tool["mcp__gmail__send_email"]
    assert mail["summary"] == "Claude Code wants to call send_email (MCP server gmail)"
    assert mail["preview"]["kind"] == "table" and ["to", "ceo@acme.com"] in mail["preview"]["rows"]
    # Asking again for the same call finds the same request.
    await asyncio.to_thread(run_hook, json.dumps(sample("pre_tool_use_bash_rm.json")), *args)
    _, again = await app.api("GET", "/api/v1/approvals")
    assert len(again["items"]) == 2


@pytest.mark.parametrize("stdin, argv, expected", [
    ("not json", [], "the hook input is not what Claude Code sends"),
    ('{"session_id": "s"}', [], "tool_name: Field required"),
    ("{}", ["--on-timeout", "maybe"], "bad hook options"),
    (json.dumps(SAMPLES["pre_tool_use_bash_rm.json"]), ["--url", "ftp://x"], "must start with http"),
])
def test_any_error_is_a_deny_with_a_reason_and_exit_0(stdin: str, argv: list[str], expected: str) -> None:
    code, answer = run_hook(stdin, *argv)
    out = answer["hookSpecificOutput"]
    assert code == 0 and out["permissionDecision"] == "deny" and expected in out["permissionDecisionReason"]


def test_edit_multiedit_and_write_previews_are_diffs_against_the_file(tmp_path: Path) -> None:
    target = tmp_path / "billing.py"
    target.write_text("RATE = 0.2\nFEE = 1\n")
    edit = preview("Edit", {"file_path": str(target), "old_string": "RATE = 0.2", "new_string": "RATE = 0.25"})
    assert edit["kind"] == "diff" and "-RATE = 0.2\n+RATE = 0.25\n" in edit["unified"]
    assert edit["unified"].startswith(f"--- {target}\n+++ {target}\n")  # an absolute path as it is, not a//tmp
    multi = preview("MultiEdit", {"file_path": str(target), "edits": [
        {"old_string": "RATE = 0.2", "new_string": "RATE = 0.3"}, {"old_string": "FEE = 1", "new_string": "FEE = 2"}]})
    assert "+RATE = 0.3" in multi["unified"] and "+FEE = 2" in multi["unified"]
    new = preview("Write", {"file_path": str(tmp_path / "new.txt"), "content": "hello\n"})
    assert new["unified"].startswith("--- /dev/null") and "+hello" in new["unified"]
    fetch = preview("WebFetch", {"url": "https://example.com/a", "prompt": "summarise"})
    assert fetch == {"kind": "markdown", "text": "Fetch https://example.com/a\n\nThen: summarise"}
    nested = preview("mcp__db__query", {"sql": "select 1", "options": {"limit": 5}})
    assert nested == {"kind": "json", "value": {"sql": "select 1", "options": {"limit": 5}}}


@pytest.mark.parametrize("argv, stdin", [(["hook", "claude-code"], "{not json"), (["hook", "gemini"], "{}"),
                                         (["hook", "claude-code", "--help"], "{}")])
def test_the_console_command_fails_closed_too(argv: list[str], stdin: str) -> None:
    done = subprocess.run([sys.executable, "-m", "bot", *argv], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


POLICY = """
rules:
  - name: no-force-push
    tool: Bash
    params: {command: {regex: "push (--force|-f)"}}
    effect: deny
    reason: history on main is never rewritten by an agent
  - name: reads-are-fine
    tool: WebFetch
    effect: allow
"""


async def test_policy_decides_at_once_and_the_hook_says_so(db_url: str, slack: SlackEmulator, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    app = await start_app(db_url, slack, SIGNOFF_POLICY=str(policy))
    try:
        args = ("--url", app.url, "--token", API_TOKEN, "--channel", "C1", "--wait", "5")
        push = {**SAMPLES["pre_tool_use_bash_rm.json"], "tool_input": {"command": "git push --force origin main"}}
        _, denied = await asyncio.to_thread(run_hook, json.dumps(push), *args)
        out = denied["hookSpecificOutput"]
        assert out["permissionDecision"] == "deny"
        assert out["permissionDecisionReason"].startswith("Signoff: rejected by Signoff's policy: ")
        assert "never rewritten" in out["permissionDecisionReason"]
        fetch = {**SAMPLES["pre_tool_use_bash_rm.json"], "tool_name": "WebFetch", "tool_use_id": "toolu_fetch",
                 "tool_input": {"url": "https://example.com/changelog", "prompt": "summarise"}}
        _, allowed = await asyncio.to_thread(run_hook, json.dumps(fetch), *args)
        out = allowed["hookSpecificOutput"]
        assert out["permissionDecision"] == "allow" and out["updatedInput"] == fetch["tool_input"]
        assert out["permissionDecisionReason"].startswith("Approved by Signoff's policy")
        # No card for either. The allowed (high-risk) call gets its FYI after the fact, through the outbox:
        # let the outbox finish first, so neither a late card nor a late FYI escapes the check.
        assert app.signoff is not None
        await app.signoff.dispatcher.drain()
        posts = [c for c in slack.calls if c.method == "chat.postMessage"]
        assert not [c for c in posts if (c.args.get("metadata") or {}).get("event_type") == CARD_EVENT_TYPE]
        assert [c.args["text"].split(":")[0] for c in posts] == ["🟠 FYI"]
        assert "`WebFetch` was allowed without asking" in posts[0].args["text"]
    finally:
        await app.stop()
