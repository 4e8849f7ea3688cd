"""An outbox item: a side effect committed with a state change and performed after the commit; and
`CardPosted`, what a card post's delivery brings back.

A domain value: the use cases make items (bot/outbox/effects.py has the one constructor of each kind),
storage stores and claims them, the dispatcher (bot/outbox/dispatcher.py) delivers them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from bot.domain.model import AuditEvent


@dataclass(frozen=True)
class OutboxItem:
    """A side effect to perform after commit: a Slack call or a webhook.

    `dedupe_key` is unique: enqueueing the same effect twice stores it once.
    `attempts` counts claims, `failures` counts attempts that ended in a known
    failure; a claimed item with more earlier attempts than failures may have
    taken effect already (the process died mid-call), so its handler must check.
    """

    kind: str
    dedupe_key: str
    payload: dict[str, Any] = field(default_factory=dict)
    request_id: str | None = None
    id: int | None = None
    status: str = "pending"
    attempts: int = 0
    failures: int = 0
    next_attempt_at: datetime | None = None
    last_error: str | None = None
    created_at: datetime | None = None

    @classmethod
    def due(
        cls, kind: str, dedupe_key: str, at: datetime, *, ordered_by: str | None, payload: dict[str, Any]
    ) -> OutboxItem:
        """An item to deliver from `at` on; items with the same `ordered_by` are delivered in order."""
        return cls(kind=kind, dedupe_key=dedupe_key, payload=payload, request_id=ordered_by, created_at=at,
                   next_attempt_at=at)

    @property
    def uncertain(self) -> bool:
        """True when an earlier attempt of this (claimed) item ended without a known result."""
        return self.attempts - 1 > self.failures

    def evolve(self, **changes: Any) -> OutboxItem:
        return replace(self, **changes)


@dataclass(frozen=True)
class CardPosted:
    """Where a request's card went (Slack's channel id and ts): a card post's result, written with its
    delivery's done mark (`Store.outbox_finished`) and audited as "posted" only if it was stored."""

    request_id: str
    channel: str
    ts: str

    def audit(self, now: datetime) -> AuditEvent:
        return AuditEvent(self.request_id, "posted", now, None, {"channel": self.channel, "ts": self.ts})
