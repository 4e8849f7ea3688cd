"""What the edges read: requests, their audit and outbox rows, a person's inbox. Read-only.

The Slack listeners and deliveries, the agent API and the runner's Slack side read through here and
write only through the use cases (bot/approvals/service.py, bot/approvals/timers.py, bot/approvals/homes.py, ...), which alone hold
the store; tests/project/test_layers.py keeps the edges off the store.
"""

from __future__ import annotations

from datetime import datetime

from bot.domain.model import AuditEvent, Request
from bot.domain.outbox import OutboxItem
from bot.domain.inbox import Inbox
from storage.base import Store


class Reads:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def request(self, request_id: str) -> Request | None:
        """The request as stored now (None: no such request)."""
        return await self._store.get_request(request_id)

    async def audit(self, request_id: str) -> list[AuditEvent]:
        """The audit rows of a request or a run, oldest first."""
        return await self._store.audit_events(request_id)

    async def outbox(self, request_id: str) -> list[OutboxItem]:
        """The outbox items of a request or a run, in order."""
        return await self._store.outbox_items(request_id)

    async def inbox(self, user_id: str, *, limit: int, decided_since: datetime) -> Inbox:
        """What a person's App Home and `/signoff pending` show."""
        return await self._store.inbox(user_id, limit=limit, decided_since=decided_since)
