"""The pure parts: duration syntax, the timeline plan, merging a body's timing with the defaults."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.durations import DurationError, compact, format_duration, parse_duration
from bot.domain.model import Outcome, Risk
from bot.domain.timing import (
    DEFAULT,
    Escalate,
    Expire,
    Level,
    Remind,
    Timing,
    TimingError,
    after_escalate,
    after_escalate_to_person,
    after_hand_back,
    after_remind,
    combine,
    initial_state,
    next_action,
    next_due,
    next_level,
    snoozed,
)

T0 = datetime(2030, 1, 7, 9, 0, tzinfo=UTC)
M = timedelta(minutes=1)


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90), ("15m", 900), ("4h", 14400), ("2d", 172800), ("1h30m", 5400), (" 10M ", 600), ("365d", 365 * 86400),
])  # fmt: skip
def test_durations_parse(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "15", "m", "-5m", "1.5h", "0s", "0m0s", "15 m", "15min", "1w", "366d", None, 5])
def test_bad_durations_say_what_is_accepted(text: object) -> None:
    with pytest.raises(DurationError) as caught:
        parse_duration(text)
    assert any(hint in str(caught.value) for hint in ("90s, 15m, 4h, 2d", "at least 1s", "maximum of 365d"))


def test_durations_format_for_people_and_round_trip() -> None:
    assert format_duration(timedelta(hours=4)) == "4h"
    assert format_duration(timedelta(minutes=90)) == "1h 30m"
    assert format_duration(timedelta(days=2, hours=3, minutes=5)) == "2d 3h"
    assert format_duration(timedelta(0)) == "0s"
    for value in ("90s", "1h30m", "2d", "1d2h3m4s"):
        assert parse_duration(compact(parse_duration(value))) == parse_duration(value)


FULL = Timing(
    remind_every=10 * M, remind_max=2,
    levels=(Level(30 * M, ("UMGR",)), Level(20 * M, ("SDIR",), add_as_approvers=False)),
    loops=1, timeout=3 * 60 * M, timeout_outcome=Outcome.REJECTED,
)  # fmt: skip


def run(timing: Timing, until: timedelta, step: timedelta = M) -> list[tuple[int, object]]:
    """Drive the plan minute by minute like a sweep would; (minute, action) for everything it does."""
    state = initial_state(timing, T0)
    done: list[tuple[int, object]] = []
    now = T0
    while now <= T0 + until:
        action = next_action(timing, state, now)
        while action is not None:
            minute = int((now - T0) / M)
            done.append((minute, action))
            if isinstance(action, Expire):
                return done
            if isinstance(action, Remind):
                state = after_remind(timing, state, now)
            else:
                assert isinstance(action, Escalate)
                state = after_escalate(timing, state, action, now, holders=("U1",))
            assert next_due(state) is None or next_due(state) > now or next_action(timing, state, now) is not None
            action = next_action(timing, state, now)
        now += step
    return done


def test_the_whole_timeline_in_order() -> None:
    done = run(FULL, timedelta(hours=4))
    assert [(m, type(a).__name__, getattr(a, "number", None), getattr(a, "loop", None)) for m, a in done] == [
        (10, "Remind", 1, None),
        (20, "Remind", 2, None),
        (30, "Escalate", 1, 0),
        (50, "Escalate", 2, 0),
        (80, "Escalate", 1, 1),  # the chain repeats once (loops=1): level 1's 30m after level 2
        (100, "Escalate", 2, 1),
        (180, "Expire", None, None),
    ]
    assert done[-1][1] == Expire(Outcome.REJECTED, 3 * 60 * M)


def test_an_outage_collapses_missed_reminders_but_fires_every_missed_level_in_order() -> None:
    timing = Timing(remind_every=10 * M, remind_max=5, levels=FULL.levels, timeout=None)
    done = run(timing, timedelta(minutes=130), step=timedelta(minutes=65))  # sweeps at 0, 65 and 130 min
    assert [(m, type(a).__name__, getattr(a, "number", None)) for m, a in done] == [
        (65, "Remind", 1),  # slots at 10..60 were missed: one reminder, not six
        (65, "Escalate", 1),  # due at 30
        (65, "Escalate", 2),  # due at 50: nobody in the chain is skipped
        (130, "Remind", 2),
    ]


def test_timeout_wins_over_anything_due_with_it() -> None:
    timing = Timing(remind_every=30 * M, remind_max=3, levels=(Level(60 * M, ("UMGR",)),), timeout=60 * M)
    state = initial_state(timing, T0)
    assert next_action(timing, state, T0 + 60 * M) == Expire(Outcome.EXPIRED, 60 * M)


def test_an_escalation_stands_in_for_the_reminder_due_with_it() -> None:
    timing = Timing(remind_every=10 * M, remind_max=5, levels=(Level(30 * M, ("UMGR",)),))
    done = run(timing, timedelta(minutes=45))
    assert [(m, type(a).__name__) for m, a in done] == [
        (10, "Remind"), (20, "Remind"), (30, "Escalate"), (40, "Remind"),
    ]
    assert [a.number for _, a in done if isinstance(a, Remind)] == [1, 2, 3]  # the absorbed slot is not counted


def test_snooze_moves_the_next_reminder_only() -> None:
    state = initial_state(FULL, T0)
    later = snoozed(state, T0 + 5 * M, timedelta(hours=1))
    assert later is not None
    assert later.remind_at == T0 + 65 * M and later.snoozed_until == T0 + 65 * M
    assert (later.escalate_at, later.expires_at) == (state.escalate_at, state.expires_at)
    # Snoozing never brings a reminder forward, and there is nothing to snooze when none is left.
    assert snoozed(later, T0 + 6 * M, timedelta(minutes=1)).remind_at == T0 + 65 * M  # type: ignore[union-attr]
    assert snoozed(state.evolve(remind_at=None), T0, timedelta(hours=1)) is None


def test_escalating_by_hand_restarts_the_chain_from_now_and_hand_back_returns_it() -> None:
    state = initial_state(FULL, T0)
    step = next_level(FULL, state)
    assert step is not None and (step.loop, step.number) == (0, 1)
    up = after_escalate(FULL, state, step, T0 + 5 * M, holders=("U1",), by="U1", note="over my limit")
    assert (up.level, up.escalated_to, up.escalated_from, up.escalated_by) == (1, ("UMGR",), ("U1",), "U1")
    assert up.escalate_at == T0 + 25 * M  # level 2's 20m counted from the hand escalation
    back = after_hand_back(FULL, up, T0 + 10 * M, by="UMGR", note="ask the customer")
    assert (back.escalated_to, back.escalated_from, back.handed_back) == (("U1",), ("UMGR",), True)
    assert back.escalate_at == T0 + 30 * M and back.level == 1  # the next automatic step waits its full 20m
    person = after_escalate_to_person(state, "U9", by="U1", note=None)
    assert (person.escalated_to, person.level, person.escalate_at) == (("U9",), 0, state.escalate_at)


def test_the_chain_ends_after_its_loops() -> None:
    timing = Timing(levels=(Level(10 * M, ("UMGR",)),), loops=0)
    state = initial_state(timing, T0)
    step = next_action(timing, state, T0 + 10 * M)
    assert isinstance(step, Escalate)
    state = after_escalate(timing, state, step, T0 + 10 * M, holders=())
    assert state.escalate_at is None and next_level(timing, state) is None and next_due(state) is None


DEFAULTS = Timing(remind_every=timedelta(hours=1), remind_max=3, timeout=timedelta(hours=24))


def test_combine_takes_what_was_given_and_defaults_the_rest() -> None:
    timing = combine(DEFAULTS, risk=Risk.HIGH, reminders=(10 * M, 2))
    assert (timing.remind_every, timing.remind_max, timing.timeout) == (10 * M, 2, timedelta(hours=24))
    assert combine(DEFAULTS, risk=Risk.HIGH, reminders=None, timeout=None) == Timing()
    # A default that does not fit what the caller gave is not the caller's fault: it just never fires.
    assert combine(DEFAULTS, risk=Risk.HIGH, timeout=(30 * M, Outcome.EXPIRED)).timeout == 30 * M
    assert combine(DEFAULTS, risk=Risk.LOW, timeout=(30 * M, Outcome.APPROVED)).timeout_outcome is Outcome.APPROVED
    assert combine(DEFAULTS, risk=Risk.HIGH) == DEFAULTS and DEFAULT is not None


@pytest.mark.parametrize(("given", "field", "words"), [
    ({"reminders": (10 * M, 3), "timeout": (5 * M, Outcome.EXPIRED)}, "timeout.after", "first reminder"),
    ({"reminders": (10 * M, 3), "timeout": (10 * M, Outcome.EXPIRED)}, "timeout.after", "first reminder"),
    ({"escalation": ((Level(30 * M, ("UMGR",)),), 0), "timeout": (20 * M, Outcome.EXPIRED)}, "timeout.after",
     "first escalation"),
    ({"timeout": (60 * M, Outcome.APPROVED)}, "timeout.outcome", "low-risk"),
])  # fmt: skip
def test_combine_refuses_timings_that_cannot_work(given: dict[str, object], field: str, words: str) -> None:
    with pytest.raises(TimingError) as caught:
        combine(DEFAULTS, risk=Risk.HIGH, **given)  # type: ignore[arg-type]
    assert caught.value.field == field and words in caught.value.message


def test_timing_json_round_trips() -> None:
    assert Timing.from_json(FULL.to_json()) == FULL
    assert Timing.from_json(Timing().to_json()) == Timing()


def test_settings_give_the_default_timing_and_name_a_bad_value() -> None:
    from bot.process.settings import Settings, SettingsError

    base = {"SLACK_BOT_TOKEN": "xoxb-x", "SLACK_SIGNING_SECRET": "s"}
    assert Settings.from_env(base, dotenv=None).default_timing() == Timing(
        remind_every=timedelta(hours=1), remind_max=3, timeout=timedelta(hours=24))
    custom = Settings.from_env({**base, "SIGNOFF_REMIND_EVERY": "off", "SIGNOFF_ESCALATE_AFTER": "2h",
                                "SIGNOFF_ESCALATE_TO": "UMGR,SLEADS", "SIGNOFF_TIMEOUT": "8h",
                                "SIGNOFF_TIMEOUT_OUTCOME": "reject"}, dotenv=None)
    assert custom.default_timing() == Timing(levels=(Level(timedelta(hours=2), ("UMGR", "SLEADS")),),
                                             timeout=timedelta(hours=8), timeout_outcome=Outcome.REJECTED)
    for bad, name in [({"SIGNOFF_TIMEOUT": "4 hours"}, "SIGNOFF_TIMEOUT"),
                      ({"SIGNOFF_TIMEOUT_OUTCOME": "approve"}, "SIGNOFF_TIMEOUT_OUTCOME"),
                      ({"SIGNOFF_ESCALATE_AFTER": "1h"}, "SIGNOFF_ESCALATE_TO"),
                      ({"SIGNOFF_TIMEOUT": "30m"}, "SIGNOFF_REMIND_EVERY"),
                      ({"SIGNOFF_CLOCK_FILE": "/nonexistent/clock"}, "SIGNOFF_CLOCK_FILE")]:
        with pytest.raises(SettingsError) as caught:
            Settings.from_env({**base, **bad}, dotenv=None)
        assert name in str(caught.value) and "\n" not in str(caught.value)
