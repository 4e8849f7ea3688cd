"""Policy at submit, over HTTP: deny and allow are recorded and returned at once (no card), medium
posts an FYI in the channel, ask posts today's card with the tier's approvers and timing filled in."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.app import App, approval_body
from tests.support.policies import NEVER_DELETE_PROD, READS_ARE_FINE

POLICY = """\
tiers:
  high:
    approvers: [U1, S1]
    reminders: {every: 20m, max: 2}
    timeout: {after: 6h, outcome: reject}
rules:
  - name: no-external-wires
    tool: wire_transfer
    params: {iban: {regex: "^(?!DE)"}}
    effect: deny
""" + NEVER_DELETE_PROD + READS_ARE_FINE + """\
  - name: small-refunds
    tool: refund
    params: {amount: {le: 100}}
    effect: allow
    tier: medium
"""


pytestmark = pytest.mark.policy(POLICY, usergroups={"S1": ["U2", "U3"]})


def body(name: str, params: dict[str, object], **overrides: object) -> dict[str, object]:
    made = approval_body(action={"name": name, "params": params}, preview=None, **overrides)
    if "risk" not in overrides:
        del made["risk"]  # the agent names none: policy alone sets the tier
    return made


async def test_deny_is_recorded_and_returned_at_once(papp: App) -> None:
    status, denied = await papp.api("POST", "/api/v1/approvals",
                                    json=body("delete_bucket", {"env": "prod", "name": "b"}, risk="low"))
    assert status == 201 and denied["status"] == "rejected"
    decision = denied["decision"]
    assert (decision["via"], decision["rule"], decision["grant_id"], decision["decided_by"]) == (
        "policy", "never-delete-prod", None, None)
    assert "never-delete-prod" in decision["comment"] and "prod is deleted by people only" in decision["comment"]
    assert denied["policy"]["outcome"] == "deny" and denied["card"] is None
    _, foreign = await papp.api("POST", "/api/v1/approvals", json=body("wire_transfer", {"iban": "FR761234"}))
    assert foreign["status"] == "rejected" and foreign["decision"]["rule"] == "no-external-wires"
    _, again = await papp.api("GET", f"/api/v1/approvals/{denied['id']}")
    assert again["decision"]["rule"] == "never-delete-prod"
    assert papp.signoff is not None
    audit = await papp.signoff.store.audit_events(denied["id"])
    decided = [e for e in audit if e.type == "decided"]
    assert decided and decided[0].data["rule"] == "never-delete-prod" and decided[0].data["via"] == "policy"
    # No card and no message for it, ever: ask for a card that is asked next and see only that one.
    _, asked = await papp.api("POST", "/api/v1/approvals", json=body("send_email", {"to": "a@b.co"}))
    await papp.card(asked["id"])
    posts = papp.slack.calls_to("chat.postMessage")
    assert len(posts) == 1 and denied["id"] not in str(posts[0].args)


async def test_allow_low_is_auto_approved_without_a_message(papp: App) -> None:
    status, allowed = await papp.api("POST", "/api/v1/approvals", json=body("read_file", {"path": "/etc/motd"}))
    assert status == 201 and allowed["status"] == "approved"
    assert (allowed["decision"]["via"], allowed["decision"]["rule"]) == ("policy", "reads-are-fine")
    assert allowed["risk"] == "low" and allowed["policy"]["fyi"] is False
    _, waited = await papp.api("GET", f"/api/v1/approvals/{allowed['id']}?wait=1")
    assert waited["status"] == "approved"  # a long-poll returns at once


async def test_medium_is_approved_and_the_channel_gets_an_fyi(papp: App) -> None:
    _, allowed = await papp.api("POST", "/api/v1/approvals",
                                json=body("refund", {"amount": 40, "order": "o-1"}, summary="Refund order o-1"))
    assert allowed["status"] == "approved" and allowed["risk"] == "medium"
    [fyi] = await papp.slack.wait_for("chat.postMessage")
    assert fyi.args["channel"] == "C1"
    assert "FYI" in fyi.args["text"] and "small-refunds" in fyi.args["text"] and "Refund order o-1" in fyi.args["text"]
    assert allowed["card"] is None
    # Just over the limit: no rule allows it; the policy's default tier (high) asks.
    _, asked = await papp.api("POST", "/api/v1/approvals", json=body("refund", {"amount": 101, "order": "o-2"}))
    assert asked["status"] == "pending"
    # An agent that says the refund is high risk: still allowed by the rule, recorded at the higher risk.
    _, raised = await papp.api("POST", "/api/v1/approvals", json=body("refund", {"amount": 40}, risk="high"))
    assert raised["status"] == "approved" and raised["risk"] == "high"


async def test_ask_gets_the_tiers_approvers_and_timing_where_the_request_gave_none(papp: App) -> None:
    _, asked = await papp.api("POST", "/api/v1/approvals",
                              json=body("send_email", {"to": "x@y.co"}, approvers=[]))
    assert asked["status"] == "pending" and asked["approvers"] == ["U1", "S1"]
    assert asked["timing"]["reminders"] == {"every": "20m", "max": 2}
    assert asked["timing"]["timeout"] == {"after": "6h", "outcome": "reject"}
    assert asked["policy"] == {"outcome": "ask", "tier": "high", "rule": None, "grant_id": None, "fyi": False,
                               "via": None, "reason": "tier high: a person decides"}
    await papp.card(asked["id"])
    # Group members may decide (S1 -> U2), others may not.
    await papp.click(asked["id"], "UOUT")
    [note] = await papp.slack.wait_for("chat.postEphemeral")
    assert "not one of the approvers" in note.args["text"]
    await papp.click(asked["id"], "U2")
    _, decided = await papp.api("GET", f"/api/v1/approvals/{asked['id']}?wait=5")
    assert decided["status"] == "approved" and decided["decision"]["via"] == "button"
    # What the request gave wins over the tier's reminders, and its timeout when it ends sooner; the
    # tier's approvers hold (the agent's are kept as asked-for, issue 33).
    _, own = await papp.api("POST", "/api/v1/approvals",
                            json=body("send_email", {"to": "x@y.co"}, approvers=["U3"], reminders=False,
                                      timeout="2h"))
    assert own["approvers"] == ["U1", "S1"] and own["asked"] == {"approvers": ["U3"], "timeout": "2h"}
    assert own["timing"]["reminders"] is None
    assert own["timing"]["timeout"] == {"after": "2h", "outcome": "expire"}


async def test_policy_status_endpoint(papp: App, tmp_path: Path) -> None:
    status, info = await papp.api("GET", "/api/v1/policy")
    assert status == 200 and info["loaded"] is True and info["rules"] == 4
    assert info["path"] == str(tmp_path / "policy.yaml") and info["last_error"] is None


async def test_without_a_policy_file_everything_asks(app: App) -> None:
    _, asked = await app.api("POST", "/api/v1/approvals", json=body("read_file", {"path": "/etc/motd"}, risk="low"))
    assert asked["status"] == "pending" and "policy" not in asked
    _, info = await app.api("GET", "/api/v1/policy")
    assert info["loaded"] is False
