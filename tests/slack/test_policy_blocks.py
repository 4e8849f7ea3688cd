"""Policy's Block Kit: the card's remember button and notes, the remember and away modals, the grant
list and the away control are valid for slack_sdk and stay within Slack's limits."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from bot.domain.grants import Delegation, FieldMatch, Grant, Scope
from bot.domain.model import Action, Risk
from bot.slack import grant_views as views
from bot.slack.policy_cards import fyi_text, render_policy_card
from tests.slack.test_blocks import NOW, assert_valid_message, make_request

POLICY = {"outcome": "ask", "tier": "high", "rule": "mail-asks", "grant_id": None, "reason": "r", "fyi": False,
          "via": None}
PARAMS = {"to": "ann@example.com", "subject": "<!channel> hi", "amount": 4, "cc": "not an address"}


def request(**changes: Any) -> Any:
    base: dict[str, Any] = {"action": Action("send_email", PARAMS), "extra": {"policy": POLICY}}
    base.update(changes)
    return make_request(**base)


def buttons(card: dict[str, Any]) -> list[str]:
    return [e["action_id"] for b in card["blocks"] if b["type"] == "actions" for e in b["elements"]]


def test_card_has_remember_and_notes() -> None:
    delegations = [{"user": "U1", "delegate": "U3", "until": "2099-12-24T00:00:00Z", "added": True}]
    card = render_policy_card(request(extra={"policy": POLICY, "delegations": delegations}), now=NOW)
    assert_valid_message(card)
    assert buttons(card)[:2] == ["signoff_approve", "signoff_remember"]
    shown = str(card["blocks"])
    assert "mail-asks" in shown and "<@U1> is away" in shown and "<@U3> may decide" in shown


def test_no_remember_without_policy_or_for_critical() -> None:
    assert "signoff_remember" not in buttons(render_policy_card(request(extra={}), now=NOW))
    assert "signoff_remember" not in buttons(render_policy_card(request(risk=Risk.CRITICAL), now=NOW))


def test_remember_modal_is_valid_and_parses() -> None:
    req = request(extra={"policy": POLICY, "run_id": "run_1", "api_token": "deploy-bot"})
    view = views.remember_modal(req)
    assert View(**view).to_dict() == view
    options = [o["value"] for b in view["blocks"] if b.get("block_id") == "generalise"
               for o in b["element"]["options"]]
    assert options == ["to:domain", "subject:any", "cc:any"]  # numbers are never widened
    scopes = [o["value"] for b in view["blocks"] if b.get("block_id") == "scope" for o in b["element"]["options"]]
    assert scopes == ["run", "agent", "channel", "everyone"]
    values = {"generalise": {"generalise": {"selected_options": [{"value": "to:domain"}]}},
              "scope": {"scope": {"selected_option": {"value": "channel"}}},
              "duration": {"duration": {"selected_option": {"value": "7d"}}}}
    choice, errors = views.parse_remember(req, values)
    assert errors == {} and choice is not None
    assert (choice.choices, choice.scope, choice.duration) == ({"to": "domain"}, Scope.CHANNEL, timedelta(days=7))
    forged = {**values, "generalise": {"generalise": {"selected_options": [{"value": "amount:any"}]}}}
    assert views.parse_remember(req, forged)[1] == {"generalise": "That option does not belong to this request."}
    assert "scope" in views.parse_remember(req, {**values, "scope": {}})[1]
    # "This agent" is the token that made the request; a request with no token identity is never offered it.
    assert views.scope_value(req, Scope.AGENT) == "deploy-bot"
    anonymous = request(extra={"policy": POLICY, "run_id": "run_1"}, requested_by="deploy-bot")
    assert [o["value"] for o in views.scope_options(anonymous)] == ["run", "channel", "everyone"]
    agent_choice = {**values, "scope": {"scope": {"selected_option": {"value": "agent"}}}}
    assert views.parse_remember(anonymous, agent_choice)[1] == {"scope": "Pick who the grant is for."}


def test_grant_list_and_away_control() -> None:
    grants = [Grant(f"grt_{n}", "send_email", {"to": FieldMatch("glob", "*@example.com"),
                                              "subject": FieldMatch("eq", "<!here>")}, Scope.CHANNEL, "C1", "U1",
                    NOW, expires_at=NOW + timedelta(days=1) if n % 2 else None) for n in range(12)]
    blocks = [*views.away_blocks([Delegation("U1", "U2", NOW - timedelta(days=1), NOW + timedelta(days=1))],
                                 now=NOW), *views.grant_blocks(grants)]
    for block in blocks:
        assert Block.parse(block).to_dict() == block  # type: ignore[union-attr]
    revoke = [b for b in blocks if b.get("accessory", {}).get("action_id") == views.REVOKE]
    assert len(revoke) == views.GRANTS_SHOWN and "2 more" in str(blocks[-1])
    assert "<!here>" not in str(blocks) and "I'm back" in str(blocks[0])
    assert "Away…" in str(views.away_blocks([], now=NOW))
    away = views.away_modal()
    assert View(**away).to_dict() == away


def test_fyi_text_escapes_agent_text() -> None:
    text = fyi_text(request(summary="<!channel> refund <@U1>", extra={"policy": {**POLICY, "rule": "small"}}))
    assert "<!channel>" not in text and "<@U1>" not in text and "small" in text
