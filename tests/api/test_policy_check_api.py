"""`POST /api/v1/policy/check`: the verdict submit would reach, over HTTP, with nothing written.

The agent is named by its token (never by the body), its `risk` only raises the tier, a bad body is
refused with the field named, and a token that floods checks is answered 429.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.sandbox import SlackEmulator
from tests.support.app import App, policy_app
from tests.support.policies import NEVER_DELETE_PROD, READS_ARE_FINE

TOKENS = "agent-a:token-aaaaaaaa:agent,agent-b:token-bbbbbbbb:agent"
A, B = ({"Authorization": "Bearer token-aaaaaaaa"}, {"Authorization": "Bearer token-bbbbbbbb"})
PATH = "/api/v1/policy/check"

POLICY = "rules:\n" + NEVER_DELETE_PROD + READS_ARE_FINE + """\
  - name: agent-b-may-send
    tool: send_email
    requester: agent-b
    effect: allow
    tier: low
  - name: exports-ask
    tool: export_*
    effect: ask
"""


pytestmark = pytest.mark.policy(POLICY, SIGNOFF_API_TOKENS=TOKENS)  # `papp`: the app under it (tests/conftest.py)


async def check(app: App, name: str, params: dict[str, Any], who: dict[str, str] = A, **extra: Any) -> tuple[int, Any]:
    return await app.api("POST", PATH, json={"action": {"name": name, "params": params}, **extra}, headers=who)


async def nothing_written(app: App) -> None:
    status, listing = await app.api("GET", "/api/v1/approvals", headers=A)
    assert status == 200 and listing["items"] == [], listing
    assert app.slack.calls_to("chat.postMessage") == []


async def test_allow_deny_and_ask_are_answered_and_nothing_is_written(papp: App) -> None:
    status, allowed = await check(papp, "read_file", {"path": "/etc/motd"})
    assert status == 200, allowed
    assert allowed == {"outcome": "allow", "tier": "low", "rule": "reads-are-fine", "grant_id": None,
                       "reason": allowed["reason"], "via": "policy", "fyi": False, "policy": True}
    status, denied = await check(papp, "delete_bucket", {"env": "prod"})
    assert status == 200 and denied["outcome"] == "deny" and denied["rule"] == "never-delete-prod"
    assert "prod is deleted by people only" in denied["reason"]
    status, asked = await check(papp, "export_table", {"name": "users"})
    assert status == 200 and asked["outcome"] == "ask" and asked["rule"] == "exports-ask" and asked["via"] is None
    await nothing_written(papp)


async def test_the_agent_is_the_token_never_the_body(papp: App) -> None:
    # The rule allows agent-b's mail. Agent a naming itself agent-b in requested_by changes nothing.
    assert (await check(papp, "send_email", {"to": "x@example.com"}, B))[1]["outcome"] == "allow"
    status, asked = await check(papp, "send_email", {"to": "x@example.com"}, A, requested_by="agent-b")
    assert status == 200 and asked["outcome"] == "ask", asked


async def test_the_verdict_is_the_one_submit_reaches(papp: App) -> None:
    """Whatever the agent's risk: the check says what a submit of the same call then does."""
    status_of = {"allow": "approved", "deny": "rejected", "ask": "pending"}
    for name, params, risk in (("read_file", {"path": "x"}, "high"), ("read_file", {"path": "x"}, None),
                               ("delete_bucket", {"env": "prod"}, "low"), ("export_table", {}, "low"),
                               ("send_email", {"to": "a@example.com"}, "medium")):
        extra = {"risk": risk} if risk else {}
        status, verdict = await check(papp, name, params, **extra)
        assert status == 200, verdict
        created, request = await papp.api("POST", "/api/v1/approvals", headers=A, json={
            "action": {"name": name, "params": params}, "summary": f"run {name}", "channel": "C1", **extra})
        assert created == 201, request
        assert (status_of[verdict["outcome"]], verdict["tier"]) == (request["status"], request["risk"]), (name, risk)
    status, kept = await check(papp, "delete_bucket", {"env": "prod"}, risk="low")
    assert kept["outcome"] == "deny"  # a lower risk never lifts a deny


async def test_bad_bodies_are_refused_with_the_field_named(papp: App) -> None:
    for body, field in (({"action": {"params": {}}}, "action.name"),
                        ({"action": {"name": "x"}, "risk": "none"}, "risk"),
                        ({"action": {"name": "x"}, "channel": "#general"}, "channel"),
                        ({"action": {"name": "x"}, "approve": True}, "approve"),
                        ({"action": {"name": "read_\u0000"}}, "action.name")):  # PostgreSQL cannot compare it
        status, refused = await papp.api("POST", PATH, json=body, headers=A)
        assert status == 400 and [d["field"] for d in refused["error"]["details"]] == [field], refused
    status, refused = await papp.api("POST", PATH, json={"action": {"name": "x"}}, auth=False)
    assert status == 401, refused
    status, listing = await papp.api("GET", "/api/v1/approvals", headers=A)
    assert listing["items"] == []


async def test_without_a_policy_file_every_call_asks(app: App) -> None:
    status, asked = await app.api("POST", PATH, json={"action": {"name": "read_file", "params": {}}})
    assert status == 200 and asked["outcome"] == "ask" and asked["policy"] is False, asked
    assert "no policy file" in asked["reason"]


async def test_a_token_that_floods_checks_is_answered_429(db_url: str, slack: SlackEmulator, tmp_path: Path) -> None:
    async with policy_app(db_url, slack, tmp_path, POLICY, SIGNOFF_API_TOKENS=TOKENS,
                          SIGNOFF_SUBMIT_BURST_PER_TOKEN="3", SIGNOFF_SUBMIT_RATE_PER_TOKEN="0.01") as running:
        assert [(await check(running, "read_x", {}))[0] for _ in range(3)] == [200] * 3
        status, refused = await check(running, "read_x", {})
        assert status == 429 and "checks policy faster" in refused["error"]["message"], refused
        assert (await check(running, "read_x", {}, B))[0] == 200  # the other token's bucket is its own


