"""The card and modals for requests that limit their decisions (`allowed_decisions`), as validated Block Kit."""

from __future__ import annotations

from slack_sdk.models.views import View

from bot.domain.choices import allowed_decisions
from bot.domain.model import Actor, Decision, Kind, Outcome, Status, Via
from bot.slack.blocks import approval_card, respond_modal
from tests.slack.test_blocks import NOW, all_text, assert_valid_message, make_request


def decision_buttons(message: dict) -> list[str]:
    return [e["text"]["text"] for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]]


def test_allowed_decisions_pick_the_buttons_in_a_fixed_order() -> None:
    cases = {
        None: ["Approve", "Edit", "Reject"],
        ("respond", "approve"): ["Approve", "Reply instead", "Reject"],  # Reject is on every card
        ("approve",): ["Approve", "Reject"],
        ("reject", "edit"): ["Approve with edits", "Reject"],
        ("approve", "edit", "reject", "respond"): ["Approve", "Edit", "Reply instead", "Reject"],
    }
    for allowed, labels in cases.items():
        extra = {} if allowed is None else {"allowed_decisions": list(allowed)}
        card = approval_card(make_request(extra=extra), now=NOW)
        assert_valid_message(card)
        assert decision_buttons(card) == labels, allowed


def test_questions_offer_none_of_the_approval_decisions() -> None:
    assert allowed_decisions(Kind.QUESTION, {"allowed_decisions": ["approve"]}) == ()
    assert allowed_decisions(Kind.APPROVAL, {"allowed_decisions": "approve"}) == ("approve", "edit", "reject")


def test_a_reply_reads_as_a_reply_on_the_decided_card() -> None:
    decision = Decision(Outcome.REJECTED, {}, (), "Use the March figures", Actor("U1", "alice"), NOW,
                        Via.REPLY)
    card = approval_card(make_request(status=Status.REJECTED, decision=decision,
                                      extra={"allowed_decisions": ["approve", "respond"]}), now=NOW)
    assert_valid_message(card)
    text = all_text(card)
    assert "Replied instead" in text and "the action did not run" in text and "Reply" in text
    assert decision_buttons(card) == []


def test_respond_modal_requires_the_reply() -> None:
    view = respond_modal(make_request(version=3))
    assert View(**view).to_dict() == view
    assert view["callback_id"] == "signoff_respond" and view["submit"]["text"] == "Send reply"
    reply = view["blocks"][-1]
    assert reply["block_id"] == "reason" and "optional" not in reply
