"""Slack's per-channel pace in the database, so that replicas share it (bot/slack/pace.py).

`take` is one guarded write: the slot is taken only where `next_at` has passed (or the channel
has no row yet: an insert that does nothing on conflict), so two replicas asking at once get one
slot between them, and the loser learns when the next one frees. `hold` pushes a channel back
after Slack's 429 (never earlier than it already was).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import sqlalchemy as sa

from storage.schema import channel_pace
from storage.sql import SqlStore

_TAKE = (channel_pace.update()
         .where(channel_pace.c.channel == sa.bindparam("b_channel"), channel_pace.c.next_at <= sa.bindparam("b_now"))
         .values(next_at=sa.bindparam("b_next")))
_NEXT = sa.select(channel_pace.c.next_at).where(channel_pace.c.channel == sa.bindparam("b_channel"))


class PaceStore:
    def __init__(self, store: SqlStore) -> None:
        self.store = store

    async def take(self, channel: str, clock: Callable[[], datetime], interval: timedelta) -> datetime | None:
        """None if this caller took `channel`'s slot now; else when the next slot frees.

        The time is read once the transaction holds the writer (SQLite's lock; on PostgreSQL the row
        lock is taken by the UPDATE itself and held a moment): a take that queued behind other
        writes must not start its interval before it could post.
        """
        async with self.store.unit() as unit:
            conn = unit.conn
            now = clock()
            params = {"b_channel": channel, "b_now": now, "b_next": now + interval}
            if (await conn.execute(_TAKE, params)).rowcount == 1:
                return None
            first = unit._insert_ignore(channel_pace, {"channel": channel, "next_at": now + interval}, "channel")
            if (await conn.execute(first)).rowcount == 1:
                return None
            next_at: datetime | None = (await conn.execute(_NEXT, {"b_channel": channel})).scalar_one_or_none()
            # A slot that passed while we looked is another replica's to take: wait one interval.
            return next_at if next_at is not None and next_at > now else now + interval

    async def hold(self, channel: str, until: datetime) -> None:
        """Nothing goes to `channel` before `until` (Slack's Retry-After), from any replica."""
        async with self.store.unit() as unit:
            conn = unit.conn
            pushed = await conn.execute(channel_pace.update().where(
                channel_pace.c.channel == channel, channel_pace.c.next_at < until).values(next_at=until))
            if pushed.rowcount == 0:
                await conn.execute(unit._insert_ignore(channel_pace, {"channel": channel, "next_at": until}, "channel"))
