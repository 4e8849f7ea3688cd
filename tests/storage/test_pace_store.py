"""Slack's per-channel pace shared through the database: one slot per interval, whichever replica asks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from storage.pace_store import PaceStore
from storage.sql import SqlStore
from storage.stores import open_store

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def at(t: datetime) -> Callable[[], datetime]:
    return lambda: t


async def test_a_slot_is_taken_once_per_interval_and_a_429_holds_the_channel(store: SqlStore) -> None:
    pace = PaceStore(store)
    assert await pace.take("C1", at(T0), SECOND) is None  # the channel's first post: no row yet
    assert await pace.take("C1", at(T0 + timedelta(milliseconds=400)), SECOND) == T0 + SECOND
    assert await pace.take("C2", at(T0), SECOND) is None  # another channel is not held back
    assert await pace.take("C1", at(T0 + SECOND), SECOND) is None
    await pace.hold("C1", T0 + timedelta(seconds=30))  # Slack's Retry-After
    await pace.hold("C1", T0 + timedelta(seconds=5))  # never pulled earlier
    assert await pace.take("C1", at(T0 + timedelta(seconds=3)), SECOND) == T0 + timedelta(seconds=30)
    await pace.hold("C3", T0 + timedelta(seconds=10))  # a 429 on a channel with no row yet
    assert await pace.take("C3", at(T0 + timedelta(seconds=2)), SECOND) == T0 + timedelta(seconds=10)
    assert await pace.take("C3", at(T0 + timedelta(seconds=10)), SECOND) is None


async def test_replicas_asking_at_once_get_one_slot_between_them(db_url: str) -> None:
    stores = [await open_store(db_url) for _ in range(2)]  # two processes' handles on one database
    try:
        paces = [PaceStore(s) for s in stores]
        for round_ in range(3):
            now = T0 + round_ * SECOND
            answers = await asyncio.gather(*(paces[i % 2].take("C1", at(now), SECOND) for i in range(20)))
            assert answers.count(None) == 1, answers
            assert set(answers) == {None, now + SECOND}
    finally:
        for s in stores:
            await s.close()
