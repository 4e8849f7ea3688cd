"""Issue 33: the agent can never lower its own bar. Over HTTP, under a policy file and named tokens:
an agent's `risk` only raises policy's tier, the tier's approvers hold over the ones it names, its
quorum only adds, silence never approves its request, a person can always reject, `requester:`
rules key on the token (never `requested_by`), and the card says what the agent asked for above policy."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.sandbox.signed import plain_input
from tests.support.app import App, approval_body

OPS, OTHER = "ops-bot-secret-1", "other-secret-22"
TOKENS = f"ops-bot:{OPS}:agent,other:{OTHER}:agent"
POLICY = """\
default_tier: high
tiers:
  high:
    approvers: [U1, U2]
    timeout: {after: 4h, outcome: reject}
  critical:
    approvers: [U1, U2, U3]
    quorum: 2
rules:
  - name: deploys-are-critical
    tool: deploy
    tier: critical
  - name: ops-bot-may-restart
    tool: restart
    requester: ops-bot
    effect: allow
"""


pytestmark = pytest.mark.policy(POLICY, token=OTHER, SIGNOFF_API_TOKENS=TOKENS)


def body(name: str, **overrides: Any) -> dict[str, Any]:
    """An agent's body for tool `name`; it names no risk and no approvers unless `overrides` do."""
    made = approval_body(**{"action": {"name": name, "params": {"target": "prod"}}, "preview": None, "approvers": [],
                            **overrides})
    if "risk" not in overrides:
        del made["risk"]
    return made


async def post(app: App, made: dict[str, Any], token: str = OTHER) -> tuple[int, dict[str, Any]]:
    return await app.api("POST", "/api/v1/approvals", json=made, headers={"Authorization": f"Bearer {token}"})


async def test_a_low_risk_in_the_body_never_lowers_policys_tier(papp: App) -> None:
    # No rule: the file's default tier (high) holds; `risk: low` used to make any tool auto-allowed.
    status, made = await post(papp, body("drop_table", risk="low"))
    assert status == 201 and made["status"] == "pending", made
    assert (made["risk"], made["approvers"], made["policy"]["outcome"]) == ("high", ["U1", "U2"], "ask")
    # A rule that names a tier: the body's low risk does not lower it either.
    _, deploy = await post(papp, body("deploy", risk="low"))
    assert (deploy["status"], deploy["risk"], deploy["quorum"]) == ("pending", "critical", 2)
    assert deploy["confirm"] == "deploy"
    # Asking for more is honoured: critical, with that tier's approvers and quorum.
    _, more = await post(papp, body("drop_table", risk="critical"))
    assert (more["risk"], more["approvers"], more["quorum"]) == ("critical", ["U1", "U2", "U3"], 2)
    assert more["asked"] == {"risk": {"asked": "critical", "policy": "high"}}


async def test_approvers_the_agent_names_never_replace_the_tiers(papp: App) -> None:
    _, made = await post(papp, body("drop_table", approvers=["U9"]))
    assert made["approvers"] == ["U1", "U2"] and made["asked"] == {"approvers": ["U9"]}
    await papp.click(made["id"], "U9", user_name="mallory")
    [note] = await papp.slack.wait_for("chat.postEphemeral")
    assert "not one of the approvers" in note.args["text"]
    _, still = await papp.api("GET", f"/api/v1/approvals/{made['id']}")
    assert still["status"] == "pending"
    # The agent's own escalation chain may notify whom it names, never make them approvers.
    _, chain = await post(papp, body("drop_table", escalation={"levels": [{"after": "1m", "notify": ["U9"]}]}))
    assert chain["timing"]["escalation"]["levels"] == [{"after": "1m", "notify": ["U9"], "add_as_approvers": False}]


async def test_a_quorum_only_adds_and_one_nobody_can_reach_is_a_400(papp: App) -> None:
    _, made = await post(papp, body("drop_table", quorum=2))
    assert made["quorum"] == 2 and made["asked"] == {"quorum": 2}
    _, listed = await papp.api("GET", "/api/v1/approvals")
    before = len(listed["items"])
    status, refused = await post(papp, body("drop_table", quorum=3))
    assert status == 400 and refused["error"]["details"] == [
        {"field": "quorum", "message": "needs 3 distinct approvers but policy names only 2 people able to approve"}]
    _, listed = await papp.api("GET", "/api/v1/approvals")
    assert len(listed["items"]) == before


async def test_silence_never_approves_and_the_tiers_timeout_holds(papp: App) -> None:
    _, listed = await papp.api("GET", "/api/v1/approvals")
    before = len(listed["items"])
    status, refused = await post(papp, body("drop_table", risk="low", allowed_decisions=["approve"],
                                            timeout={"after": "1m", "outcome": "approve"}))
    assert status == 400 and refused["error"]["details"] == [
        {"field": "timeout.outcome", "message": "only policy can make silence approve: use expire or reject"}]
    _, listed = await papp.api("GET", "/api/v1/approvals")
    assert len(listed["items"]) == before
    tier = {"after": "4h", "outcome": "reject"}
    for asked, kept in ((False, tier), ("1d", tier), ({"after": "1h", "outcome": "expire"},
                                                       {"after": "1h", "outcome": "expire"})):
        _, made = await post(papp, body("drop_table", timeout=asked))
        assert made["timing"]["timeout"] == kept, asked


async def test_a_person_can_always_reject(papp: App) -> None:
    _, made = await post(papp, body("drop_table", allowed_decisions=["approve"]))
    assert made["allowed_decisions"] == ["approve", "reject"]
    card = await papp.card(made["id"])
    buttons = [e["action_id"] for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
    assert "signoff_reject" in buttons
    await papp.click(made["id"], "U1", action="signoff_reject", user_name="alice")
    [opened] = await papp.slack.wait_for("views.open")
    await papp.slack_client.view_submission(user="U1", user_name="alice", callback_id="signoff_reject",
                                            private_metadata=opened.args["view"]["private_metadata"],
                                            values={"reason": {"value": plain_input("not now")}})
    _, decided = await papp.api("GET", f"/api/v1/approvals/{made['id']}?wait=10")
    assert decided["status"] == "rejected" and decided["decision"]["decided_by"]["id"] == "U1"


async def test_requester_rules_key_on_the_token_never_on_requested_by(papp: App) -> None:
    # Another token that writes the allowed agent's name as its label is not that agent.
    _, forged = await post(papp, body("restart", requested_by="ops-bot"), token=OTHER)
    assert forged["status"] == "pending" and forged["policy"]["rule"] is None
    _, real = await post(papp, body("restart", requested_by="whatever"), token=OPS)
    assert real["status"] == "approved" and real["decision"]["rule"] == "ops-bot-may-restart"


async def test_the_card_says_the_agent_asked_for_more(papp: App) -> None:
    _, made = await post(papp, body("drop_table", risk="critical", quorum=3, approvers=["U9"]))
    card = await papp.card(made["id"])
    text = json.dumps(card.blocks)
    assert "The agent asked for more scrutiny: risk critical (policy: high), quorum 3" in text
    assert "it also named U9, who decide only if policy lists them" in text and "<@U9>" not in text
    _, plain = await post(papp, body("drop_table"))
    assert "asked for more" not in json.dumps((await papp.card(plain["id"])).blocks)
