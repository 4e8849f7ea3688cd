"""The card's receipt footer (issue 37) as data: valid Block Kit within Slack's limits whatever the agent
reported, agent text never in mrkdwn, and each kind of outcome in its own words."""

from __future__ import annotations

import json
from datetime import timedelta

from bot.domain.model import Actor, Decision, Outcome, Preview, Status, Via
from bot.domain.outcomes import RanStatus, RunOutcome, with_outcome
from bot.slack.blocks import approval_card
from tests.slack.test_blocks import NOW, assert_valid_message, make_request


def card_with(outcome: RunOutcome, approved: dict, **changes: object) -> dict:
    decision = Decision(Outcome.APPROVED, approved, (), None, Actor("U1", "alice"), NOW, Via.BUTTON)
    request = make_request(status=Status.APPROVED, decision=decision, **changes)
    extra = with_outcome(request.extra, outcome.against(approved))
    assert extra is not None
    return approval_card(request.evolve(extra=extra), now=NOW + timedelta(minutes=1))


def mrkdwn(card: dict) -> str:
    return json.dumps([e for b in card["blocks"] if b["type"] == "context" for e in b["elements"]]
                      + [b["text"] for b in card["blocks"] if b["type"] == "section"])


def test_each_outcome_in_its_own_words() -> None:
    params = {"to": "bob@example.com", "amount": 30}
    same = card_with(RunOutcome(RanStatus.RAN, "", NOW, dict(params), "r_1"), params)
    assert "with the approved parameters" in json.dumps(same, ensure_ascii=False) and "r_1" in json.dumps(same, ensure_ascii=False)
    other = card_with(RunOutcome(RanStatus.RAN, "", NOW, {**params, "amount": 300}), params)
    assert "with different parameters" in json.dumps(other, ensure_ascii=False) and "approved 30 → ran 300" in json.dumps(other, ensure_ascii=False)
    skipped = card_with(RunOutcome(RanStatus.SKIPPED, "the file changed", NOW), params)
    assert "Not run" in json.dumps(skipped, ensure_ascii=False) and "the file changed" in json.dumps(skipped, ensure_ascii=False)
    for card in (same, other, skipped):
        assert_valid_message(card)


def test_whatever_the_agent_reports_the_card_stays_valid_and_its_text_is_never_mrkdwn() -> None:
    approved = {f"field_{i}": "x" * 500 for i in range(100)}
    used = {f"field_{i}": "<!channel> *bold* <https://evil.example|Approve>" * 20 for i in range(100)}
    huge = Preview("markdown", {"text": "line\n" * 20_000})
    card = card_with(RunOutcome(RanStatus.RAN, "", NOW, used, "<!here>" * 200), approved, preview=huge,
                     action=make_request().action.__class__("bulk", approved))
    assert_valid_message(card)
    assert "<!channel>" not in mrkdwn(card) and "evil.example" not in mrkdwn(card)
    assert "more fields" in json.dumps(card)  # the difference is cut, and says so
    skipped = card_with(RunOutcome(RanStatus.SKIPPED, "<!here> " * 500, NOW), approved, preview=huge)
    assert_valid_message(skipped)
    assert "<!here>" not in mrkdwn(skipped)
