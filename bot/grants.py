"""Use cases for remembered grants and delegation: the only way Slack handlers and the agent API
reach their storage (`storage.grants`). Each call is its own unit; times come from the clock."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from bot.clock import Clock
from bot.domain.grants import Delegation, Grant
from storage.grants import GrantStore


class Grants:
    def __init__(self, store: GrantStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    async def create(self, grant: Grant) -> None:
        """Store a grant and its audit row (one unit)."""
        async with self.store.store.unit() as unit:
            await self.store.add(unit, grant)

    async def get(self, grant_id: str) -> Grant | None:
        return await self.store.get(grant_id)

    async def live(self, *, limit: int = 100) -> list[Grant]:
        return await self.store.live(self.clock.now(), limit=limit)

    async def revoke(self, grant_id: str, by: str) -> bool:
        """True if this call revoked it (it stops matching from the next request, in every process)."""
        return await self.store.revoke(grant_id, by, self.clock.now())

    async def delegations_of(self, users: Iterable[str]) -> list[Delegation]:
        return await self.store.delegations_of(users, self.clock.now())

    async def away(self, user: str, delegate: str, until: datetime | None) -> Delegation:
        return await self.store.away(user, delegate, until, self.clock.now())

    async def back(self, user: str) -> int:
        return await self.store.back(user, self.clock.now())
