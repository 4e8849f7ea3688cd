"""What a delivery hands back to the dispatcher (bot/outbox/dispatcher.py): `Done`, `Retry` or `Dead`.

A result's own writes (`apply`: a card's ts, the DMs an escalation sends) are bot/approvals/delivery_results.py's;
they run in the unit that finishes the item (bot/approvals/outbox_rows.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bot.approvals.delivery_results import Write
from bot.domain.model import AuditEvent
from bot.domain.outbox import CardPosted, OutboxItem


@dataclass(frozen=True)
class Done:
    """The effect happened. `card` (a card post's ts) is stored, then `apply` runs, in the same unit
    that marks the item done."""

    apply: Write | None = None
    audit: tuple[AuditEvent, ...] = ()
    card: CardPosted | None = None


@dataclass(frozen=True)
class Retry:
    """Try again in `after` seconds. `definite`: this attempt surely had no effect."""

    after: float
    error: str
    definite: bool = True
    # Not a failure and not an attempt: nothing was tried, the item waits for its turn (its card's
    # post, the channel's pace). The claim is given back (`Unit.outbox_postpone`).
    waiting: bool = False


@dataclass(frozen=True)
class Dead:
    """Give up on this item.

    `line`: the one ERROR line to log (what failed and what to do), instead of the bare error.
    `apply` runs in the unit that marks the item dead.
    `details`: machine-readable facts about the failure, for the handler that re-wraps it.
    """

    error: str
    audit: tuple[AuditEvent, ...] = field(default_factory=tuple)
    line: str | None = None
    apply: Write | None = None
    details: dict[str, Any] | None = None


Result = Done | Retry | Dead
Handler = Callable[[OutboxItem], Awaitable[Result]]
