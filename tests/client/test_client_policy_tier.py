"""Our clients name no risk unless told to, so policy's tier for the tool holds: low-risk calls a
policy allows are never asked about, through the Python client, the decorator's client and the
Claude Code hook. (They used to send `risk: high` on every call, which raised every tier to high,
so under a policy with low and medium tiers everything still asked.) A risk a caller names still
raises the tier, never lowers it."""

from __future__ import annotations

import json

import pytest

from signoff.client import AsyncSignoffClient
from tests.client.test_hook_calls import run
from tests.support.app import App

AGENT = "tok-tier-agent-1"
POLICY = """\
default_tier: low
tiers:
  high:
    approvers: [U1]
rules:
  - name: email-is-high
    tool: send_email
    tier: high
"""


pytestmark = pytest.mark.policy(POLICY, token=AGENT, SIGNOFF_API_TOKENS=f"tier-agent:{AGENT}:agent")


async def test_the_client_leaves_the_tier_to_policy(papp: App) -> None:
    async with AsyncSignoffClient(papp.url, AGENT) as client:
        read = await client.submit("read_file", {"path": "notes.md"}, summary="Read notes", channel="C1")
        email = await client.submit("send_email", {"to": "a@example.com"}, summary="Email", channel="C1")
        asked = await client.submit("read_file", {"path": "secrets.env"}, summary="Read secrets", channel="C1",
                                    risk="high")
    bodies = [(await papp.api("GET", f"/api/v1/approvals/{h.id}"))[1] for h in (read, email, asked)]
    assert [(b["status"], b["risk"]) for b in bodies] == [("approved", "low"), ("pending", "high"),
                                                         ("pending", "high")], bodies
    assert bodies[0]["decision"]["via"] == "policy"


async def test_the_claude_code_hook_lets_a_low_tier_call_through_with_no_card(papp: App) -> None:
    payload = {"session_id": "s-1", "cwd": "/tmp", "permission_mode": "default", "hook_event_name": "PreToolUse",
               "tool_name": "Read", "tool_input": {"file_path": "/tmp/notes.md"}, "tool_use_id": "toolu_1"}
    code, out, err = await run(papp, ["hook", "claude-code", "--token", AGENT], json.dumps(payload))
    assert code == 0, err
    answer = json.loads(out)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "allow", answer
    assert papp.slack.calls_to("chat.postMessage") == []
