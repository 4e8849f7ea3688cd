"""Reminders, escalation chains and timeouts as pure values and one pure plan.

A `Timing` is what a request was given at submit time (from the API body or the server's
defaults); a `TimerState` is how far along that timeline the request is. Given both and the
time, `next_action` says what is due now (at most one thing), and the `after_*` functions give
the state once it has happened. The sweep (bot/approvals/timers.py) claims a due row, asks the plan,
writes the new state: nothing here does I/O or reads a clock.

Semantics (PagerDuty-style escalation policies, applied to approvals):
- Reminders: every `remind_every` after the request was created, at most `remind_max` times.
  Missed slots (a long outage) collapse into one reminder; they never arrive in a burst.
- Escalation levels fire in order; each level's `after` counts from the previous level (level 1:
  from creation). After the last level the chain starts again, `loops` more times. Levels missed
  during an outage all fire, in order, so nobody in the chain is skipped.
- The timeout ends the request with `timeout_outcome`. It always wins over anything else due.
- When a reminder and an escalation are due together, the escalation goes first and stands in
  for the reminder (the reminder moves to one interval later, uncounted).
- Snooze delays the next reminder only: escalation and the timeout keep their times.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from bot.domain.durations import compact, parse_duration
from bot.domain.values import Outcome, Risk

TIMEOUT_OUTCOMES = {"expire": Outcome.EXPIRED, "reject": Outcome.REJECTED, "approve": Outcome.APPROVED}
OUTCOME_WORDS = {v: k for k, v in TIMEOUT_OUTCOMES.items()}


class TimingError(ValueError):
    """A timing the caller gave cannot work; `field` names the part of the body at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Level:
    """One escalation level: after `after`, notify `notify` (user ids U.../W..., user groups S...)."""

    after: timedelta
    notify: tuple[str, ...]
    add_as_approvers: bool = True


@dataclass(frozen=True)
class Timing:
    remind_every: timedelta | None = None
    remind_max: int = 0
    levels: tuple[Level, ...] = ()
    loops: int = 0
    timeout: timedelta | None = None
    timeout_outcome: Outcome = Outcome.EXPIRED

    @property
    def reminds(self) -> bool:
        return self.remind_every is not None and self.remind_max > 0

    def to_json(self) -> dict[str, Any]:
        """The API's shape, durations in input syntax (parses back to the same Timing)."""
        return {
            "reminders": {"every": compact(self.remind_every), "max": self.remind_max}
            if self.remind_every is not None and self.reminds else None,
            "escalation": {
                "levels": [
                    {"after": compact(lv.after), "notify": list(lv.notify), "add_as_approvers": lv.add_as_approvers}
                    for lv in self.levels
                ],
                "loops": self.loops,
            } if self.levels else None,
            "timeout": {"after": compact(self.timeout), "outcome": OUTCOME_WORDS[self.timeout_outcome]}
            if self.timeout is not None else None,
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Timing:
        reminders = data.get("reminders") or None
        escalation = data.get("escalation") or None
        timeout = data.get("timeout") or None
        return cls(
            remind_every=parse_duration(reminders["every"]) if reminders else None,
            remind_max=int(reminders["max"]) if reminders else 0,
            levels=tuple(
                Level(parse_duration(lv["after"]), tuple(lv["notify"]), bool(lv.get("add_as_approvers", True)))
                for lv in (escalation or {}).get("levels", [])
            ),
            loops=int((escalation or {}).get("loops", 0)),
            timeout=parse_duration(timeout["after"]) if timeout else None,
            timeout_outcome=TIMEOUT_OUTCOMES[timeout["outcome"]] if timeout else Outcome.EXPIRED,
        )


@dataclass(frozen=True)
class TimerState:
    """How far along its timeline a request is. `level` counts levels reached in loop `loop`."""

    reminders_sent: int = 0
    remind_at: datetime | None = None
    loop: int = 0
    level: int = 0
    escalate_at: datetime | None = None
    expires_at: datetime | None = None
    snoozed_until: datetime | None = None
    escalations: int = 0  # every escalation so far, by timer or by hand
    escalated_to: tuple[str, ...] = ()  # who the latest escalation (or hand-back) went to
    escalated_from: tuple[str, ...] = ()  # who held it before: a hand-back returns it to them
    escalated_by: str | None = None  # the person who escalated by hand (None: the timer)
    note: str | None = None  # that person's note
    handed_back: bool = False  # the latest move was a hand-back, not an escalation
    # Everyone who has been an approver of the request (kept from its first escalation on): a
    # hand-back may give approval back only to them, never to someone who was only notified.
    approvers_seen: tuple[str, ...] = ()

    @property
    def escalated(self) -> bool:
        return self.escalations > 0

    def may_hand_back(self, user_id: str) -> bool:
        """Only someone the latest move sent the request to may hand it back (to whoever sent it)."""
        return self.escalated and bool(self.escalated_from) and user_id in self.escalated_to

    def evolve(self, **changes: Any) -> TimerState:
        return replace(self, **changes)


# --------------------------------------------------------------------------- due actions


@dataclass(frozen=True)
class Remind:
    number: int  # 1-based
    of: int


@dataclass(frozen=True)
class Escalate:
    loop: int  # 0-based round of the chain
    number: int  # 1-based level
    of: int
    level: Level


@dataclass(frozen=True)
class Expire:
    outcome: Outcome
    after: timedelta


DueAction = Remind | Escalate | Expire


def initial_state(timing: Timing, created_at: datetime) -> TimerState:
    return TimerState(
        remind_at=created_at + timing.remind_every if timing.reminds and timing.remind_every else None,
        escalate_at=created_at + timing.levels[0].after if timing.levels else None,
        expires_at=created_at + timing.timeout if timing.timeout is not None else None,
    )


def next_due(state: TimerState) -> datetime | None:
    """The row's `next_due_at`: the earliest of the pending times."""
    times = [t for t in (state.remind_at, state.escalate_at, state.expires_at) if t is not None]
    return min(times) if times else None


def next_action(timing: Timing, state: TimerState, now: datetime) -> DueAction | None:
    """What is due at `now`, if anything: timeout first, then the earlier of escalation and reminder."""
    if state.expires_at is not None and state.expires_at <= now and timing.timeout is not None:
        return Expire(timing.timeout_outcome, timing.timeout)
    escalate = state.escalate_at if state.escalate_at is not None and state.escalate_at <= now else None
    remind = state.remind_at if state.remind_at is not None and state.remind_at <= now else None
    if escalate is not None and (remind is None or escalate <= remind):
        upcoming = next_level(timing, state)
        if upcoming is not None:
            return upcoming
    if remind is not None:
        return Remind(state.reminders_sent + 1, timing.remind_max)
    return None


def next_level(timing: Timing, state: TimerState) -> Escalate | None:
    """The level an escalation would reach now (the next one of this loop, or level 1 of the next loop)."""
    if not timing.levels:
        return None
    if state.level < len(timing.levels):
        loop, number = state.loop, state.level + 1
    elif state.loop < timing.loops:
        loop, number = state.loop + 1, 1
    else:
        return None
    return Escalate(loop, number, len(timing.levels), timing.levels[number - 1])


def after_remind(timing: Timing, state: TimerState, now: datetime) -> TimerState:
    sent = state.reminders_sent + 1
    remind_at = None
    if sent < timing.remind_max and timing.remind_every is not None and state.remind_at is not None:
        remind_at = state.remind_at + timing.remind_every
        if remind_at <= now:  # an outage skipped slots: one reminder now, the next a full interval later
            remind_at = now + timing.remind_every
    return state.evolve(reminders_sent=sent, remind_at=remind_at)


def after_escalate(
    timing: Timing,
    state: TimerState,
    step: Escalate,
    now: datetime,
    *,
    holders: tuple[str, ...],
    by: str | None = None,
    note: str | None = None,
) -> TimerState:
    """State once `step` happened. By timer the chain keeps its schedule; by hand it restarts from now.

    `holders` are who had the request before (the original approvers or the previous level).
    """
    base = state.escalate_at if by is None and state.escalate_at is not None else now
    moved = state.evolve(loop=step.loop, level=step.number)
    following = next_level(timing, moved)
    remind_at = state.remind_at
    if remind_at is not None and remind_at <= now and timing.remind_every is not None:
        remind_at = now + timing.remind_every  # the escalation message stands in for this reminder
    return moved.evolve(
        escalate_at=base + following.level.after if following is not None else None,
        remind_at=remind_at,
        escalations=state.escalations + 1,
        escalated_to=step.level.notify,
        escalated_from=holders,
        escalated_by=by,
        note=note,
        handed_back=False,
    )


def after_escalate_to_person(state: TimerState, person: str, *, by: str, note: str | None) -> TimerState:
    """Escalated by hand to one named person; the configured chain keeps its schedule."""
    return state.evolve(
        escalations=state.escalations + 1,
        escalated_to=(person,),
        escalated_from=(by,),
        escalated_by=by,
        note=note,
        handed_back=False,
    )


def after_hand_back(timing: Timing, state: TimerState, now: datetime, *, by: str, note: str | None) -> TimerState:
    """Returned to whoever escalated it; the next automatic escalation counts again from now."""
    upcoming = next_level(timing, state)
    escalate_at = state.escalate_at
    if escalate_at is not None and upcoming is not None:
        escalate_at = max(escalate_at, now + upcoming.level.after)
    return state.evolve(
        escalated_to=state.escalated_from,
        escalated_from=(by,),
        escalated_by=by,
        note=note,
        escalate_at=escalate_at,
        handed_back=True,
    )


def snoozed(state: TimerState, now: datetime, duration: timedelta) -> TimerState | None:
    """The next reminder moved to at least `now + duration`; None when no reminder is left to move."""
    if state.remind_at is None:
        return None
    until = now + duration
    return state.evolve(remind_at=max(state.remind_at, until), snoozed_until=until)


# --------------------------------------------------------------------------- combining input with defaults


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Any = _Default()  # "the caller did not say": use the server's default for that part


def combine(
    defaults: Timing,
    *,
    risk: Risk,
    reminders: tuple[timedelta, int] | None = DEFAULT,
    escalation: tuple[tuple[Level, ...], int] | None = DEFAULT,
    timeout: tuple[timedelta, Outcome] | None = DEFAULT,
) -> Timing:
    """The request's timing: each part the caller gave (None = off), else the server's default.

    Parts the caller gave must make sense together (a timeout that would end the request before
    its first reminder or first escalation is refused). A server default that does not fit a
    caller's part simply never fires: the caller cannot be blamed for settings they cannot see.
    """
    timing = defaults
    if reminders is not DEFAULT:
        every, count = reminders if reminders is not None else (None, 0)
        timing = replace(timing, remind_every=every, remind_max=count)
    if escalation is not DEFAULT:
        levels, loops = escalation if escalation is not None else ((), 0)
        timing = replace(timing, levels=levels, loops=loops)
    if timeout is not DEFAULT:
        after, outcome = timeout if timeout is not None else (None, Outcome.EXPIRED)
        timing = replace(timing, timeout=after, timeout_outcome=outcome)
    if timeout is not DEFAULT and timeout is not None:
        after, outcome = timeout
        if outcome is Outcome.APPROVED and risk is not Risk.LOW:
            raise TimingError(
                "timeout.outcome",
                f"approve on timeout is only allowed for low-risk requests (this one is {risk.value}); "
                "use expire or reject",
            )
        if reminders is not DEFAULT and reminders is not None and after <= reminders[0]:
            raise TimingError(
                "timeout.after",
                f"the timeout ({compact(after)}) must be longer than the first reminder "
                f"({compact(reminders[0])}), or that reminder could never be sent",
            )
        if escalation is not DEFAULT and escalation is not None and after <= escalation[0][0].after:
            raise TimingError(
                "timeout.after",
                f"the timeout ({compact(after)}) must be longer than the first escalation level "
                f"({compact(escalation[0][0].after)}), or nobody could ever be escalated to",
            )
    return timing
