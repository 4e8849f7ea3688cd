"""Slack's inputs kept from before their ack until handled: the use case over storage/received.py, which
bot/slack/received.py (the edge: when to store, when to replay) drives."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from storage.base import Unit
from storage.received import Received, ReceivedStore

__all__ = ["Inputs", "Received"]


class Inputs:
    def __init__(self, rows: ReceivedStore) -> None:
        self._rows = rows

    async def add(self, item: Received) -> bool:
        """Stored (committed on return); False if Slack's id for it was stored before."""
        return await self._rows.add(item)

    def done_later(self, row_id: int) -> None:
        self._rows.done_later(row_id)

    @property
    def unmarked(self) -> int:
        return self._rows.unmarked

    async def flush_done(self) -> None:
        await self._rows.flush_done()

    async def renew(self, ids: Sequence[int]) -> None:
        await self._rows.renew(ids)

    async def claim_stale(self) -> list[Received]:
        return await self._rows.claim_stale()

    async def prune(self, older_than: timedelta) -> int:
        return await self._rows.prune(older_than)

    async def open_for(self, request_id: str, unit: Unit | None = None) -> bool:
        """A stored Slack input for `request_id` is not handled yet (a person acted; it is replayed if its
        process stopped): the request must not time out under it. `unit`: checked inside the timeout's own
        decision (bot/approvals/decide.py: `unless`), so no input acked before it can be missed."""
        return await self._rows.open_for(request_id, unit)
