"""bot.domain.outcomes: an outcome is recorded once per call, a batch keeps one per item."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.domain.outcomes import RanStatus, RunOutcome, any_failed, outcome_of, with_outcome

AT = datetime(2026, 12, 5, 20, 0, tzinfo=UTC)


def test_a_second_outcome_for_the_same_call_is_not_recorded() -> None:
    first = with_outcome({"run_id": "run_1"}, RunOutcome.failed("not an email address: 'bob'", AT))
    assert first is not None and first["run_id"] == "run_1"
    assert with_outcome(first, RunOutcome(RanStatus.UNKNOWN, "restarted", AT)) is None  # a replay writes nothing
    ran = outcome_of(first)
    assert ran is not None and ran.status is RanStatus.FAILED and ran.error == "not an email address: 'bob'"
    assert any_failed(first) and not any_failed({"run_id": "run_1"})


def test_a_batch_records_per_item_and_a_single_reading_sees_none() -> None:
    one = with_outcome({}, RunOutcome.failed("disk full", AT), item="toolu_b")
    assert one is not None
    two = with_outcome(one, RunOutcome.failed("timeout", AT), item="toolu_c")
    assert two is not None and with_outcome(two, RunOutcome.failed("again", AT), item="toolu_b") is None
    assert outcome_of(two) is None  # the batch as a whole has no single outcome
    assert outcome_of(two, item="toolu_a") is None
    item = outcome_of(two, item="toolu_b")
    assert item is not None and item.error == "disk full" and item.at == AT
    assert any_failed(two)


def test_long_errors_are_kept_short_and_on_one_line() -> None:
    ran = RunOutcome.failed("line one\nline two " + "x" * 5000, AT)
    assert "\n" not in ran.error and len(ran.error) == 1000 and ran.error.endswith("…")
