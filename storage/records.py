"""The values the storage interface passes beside the domain's: what the timer sweep claims and writes.
Frozen and free of I/O, like the domain's own (where a card went, `CardPosted`, and a person's App Home
lists, `Inbox`, are the domain's: bot/domain/outbox.py, bot/domain/inbox.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.domain.model import AuditEvent
from bot.domain.outbox import OutboxItem
from bot.domain.timing import TimerState, Timing


@dataclass(frozen=True)
class DueRow:
    """A due request as the timer sweep claims it: only what the timer plan reads.

    `timers` holds the schedule (the scalar timer columns); the escalation record (who it went
    to, from whom, the note) is not read and is left at its defaults: a step that needs it (an
    escalation, a timeout) reads the whole request in the same unit.
    """

    id: str
    version: int
    timing: Timing
    timers: TimerState
    undo_until: datetime | None = None  # an approval held in its undo window (bot/domain/undo.py)


@dataclass(frozen=True)
class Reminded:
    """One reminder of the sweep: the row's new reminder columns, its audit event and outbox item.

    Written only if the row's version is still `expected_version` (then raised by one); the audit
    event and the item are stored only with the row's write, never without it.
    """

    request_id: str
    expected_version: int
    reminders_sent: int
    remind_at: datetime | None
    next_due_at: datetime | None
    at: datetime
    audit: AuditEvent
    item: OutboxItem
