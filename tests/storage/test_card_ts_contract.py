"""Storing a card's ts while a timer writes the same request (found by the chaos test on PostgreSQL).

The outbox posts the card, then stores its channel and ts in the item's own unit. A timer (a
reminder, an escalation) may write the request between the two. The ts must be stored anyway and
the timer's change kept: a lost ts would leave a card nobody can find, and a retry that did not
find it would post a second one. (The store used to read the request and write it back guarded on
the version it read; a timer committing in between made that write fail.)
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import sqlalchemy as sa

from storage.base import Store
from storage.sql import SqlStore
from tests.storage.conftest import StoreFactory
from tests.storage.test_contract import T0, make_request

TS = "1700000000.000100"


async def store_card(store: Store, request_id: str, ts: str = TS) -> bool:
    async with store.unit() as unit:
        return await unit.store_card(request_id, "C1", ts, T0 + timedelta(seconds=2))


async def waiting_for_a_row_lock(store: Store) -> None:
    """Until another connection's UPDATE waits for the row the open unit holds.

    PostgreSQL: visible in pg_stat_activity. SQLite has one writer at a time (the second unit does
    not even begin before the first commits), so there is nothing to wait for there."""
    if not isinstance(store, SqlStore) or store.dialect != "postgresql":
        return
    query = sa.text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND query ILIKE 'UPDATE requests%'")
    for _ in range(2000):
        async with store.engine.connect() as conn:
            if (await conn.execute(query)).scalar():
                return
        await asyncio.sleep(0.005)  # test-side: polling an observable state
    raise AssertionError("the card's write never waited for the timer's row lock")


async def test_the_card_ts_is_stored_while_a_timer_writes_the_request(store_factory: StoreFactory) -> None:
    timers, outbox = await store_factory(), await store_factory()  # two connections, as two processes
    request = make_request(next_due_at=T0)
    async with timers.unit() as unit:
        await unit.insert_request(request)

    async with timers.unit() as timer:  # the timer's write is in flight when the post comes back
        current = await timer.get_request(request.id)
        assert current is not None
        reminded = current.evolve(extra={"reminded": 1}, next_due_at=T0 + timedelta(hours=1),
                                  updated_at=T0 + timedelta(seconds=1))
        assert await timer.update_request(reminded, expected_version=current.version)
        storing = asyncio.create_task(store_card(outbox, request.id))
        await waiting_for_a_row_lock(timers)
    assert await storing is True

    stored = await outbox.get_request(request.id)
    assert stored is not None
    assert (stored.card_channel, stored.card_ts) == ("C1", TS)
    assert stored.extra == {"reminded": 1} and stored.next_due_at == T0 + timedelta(hours=1)  # the timer's change
    assert stored.version == request.version + 2  # both writes counted


async def test_a_second_ts_never_replaces_the_first(store: Store) -> None:
    request = make_request()
    async with store.unit() as unit:
        await unit.insert_request(request)
    assert await store_card(store, request.id) is True
    assert await store_card(store, request.id, "1700000009.000900") is False
    stored = await store.get_request(request.id)
    assert stored is not None and stored.card_ts == TS and stored.version == request.version + 1
    assert await store_card(store, "apr_no_such_request") is False
