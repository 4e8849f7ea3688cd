"""The timer sweep's claim and batched reminder write: every reminder exactly once, on every backend.

`claim_due` reads the due rows (PostgreSQL: locked, skipping rows another unit holds);
`write_reminders` writes a batch in one statement on PostgreSQL, under each row's own version
guard, with the audit event and outbox item of exactly the rows it wrote.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime, timedelta

from bot.domain.model import AuditEvent, Outcome, Request, Status
from bot.domain.timing import Timing, initial_state
from bot.domain.outbox import OutboxItem
from storage.base import DueRow, Reminded, Store
from tests.storage.conftest import StoreFactory
from tests.storage.test_contract import T0, make_request

TIMING = Timing(remind_every=timedelta(minutes=10), remind_max=3, timeout=timedelta(days=1),
                timeout_outcome=Outcome.REJECTED)
NOW = T0 + timedelta(minutes=30)


def due(at: datetime, **changes: object) -> Request:
    timers = initial_state(TIMING, T0).evolve(remind_at=at)
    return make_request(timing=TIMING, timers=timers, next_due_at=at, **changes)


async def insert(store: Store, *requests: Request) -> None:
    async with store.unit() as unit:
        for request in requests:
            await unit.insert_request(request)


def reminded(row: DueRow, now: datetime = NOW) -> Reminded:
    sent = row.timers.reminders_sent + 1
    return Reminded(row.id, row.version, sent, now + timedelta(minutes=10), now + timedelta(minutes=10), now,
                    AuditEvent(row.id, "reminded", now, None, {"number": sent}),
                    OutboxItem("slack.remind", f"remind:{row.id}:{sent}", {"number": sent}, row.id, created_at=now))


async def claim(store: Store, limit: int = 100) -> list[DueRow]:
    async with store.unit() as unit:
        return await unit.claim_due(NOW, limit=limit)


async def reminders_of(store: Store, request_id: str) -> tuple[int, int]:
    """(audit events, outbox items) of kind reminder the request has."""
    audits = [e for e in await store.audit_events(request_id) if e.type == "reminded"]
    return len(audits), len(await store.outbox_items(request_id))


async def test_claim_due_reads_the_schedule_of_due_pending_rows_oldest_first(store: Store) -> None:
    a, b = due(T0 + timedelta(minutes=20)), due(T0 + timedelta(minutes=10))
    later = due(NOW + timedelta(hours=1))
    decided = due(T0 + timedelta(minutes=5), status=Status.APPROVED)
    await insert(store, a, b, later, decided)
    rows = await claim(store)
    assert [r.id for r in rows] == [b.id, a.id]
    assert rows[1] == DueRow(a.id, a.version, TIMING, initial_state(TIMING, T0).evolve(remind_at=a.next_due_at))
    assert [r.id for r in await claim(store, limit=1)] == [b.id]


async def test_write_reminders_leaves_a_row_whose_version_moved_and_stores_nothing_for_it(store: Store) -> None:
    a, b = due(T0 + timedelta(minutes=10)), due(T0 + timedelta(minutes=11))
    await insert(store, a, b)
    rows = await claim(store)
    async with store.unit() as unit:  # someone else writes b between the claim and the reminder
        assert await unit.update_request(b.evolve(updated_at=NOW), expected_version=b.version)
    async with store.unit() as unit:
        assert await unit.write_reminders([reminded(r) for r in rows]) == [a.id]
        assert unit.enqueued == 1
    got_a, got_b = await store.get_request(a.id), await store.get_request(b.id)
    assert got_a is not None and got_a.timers is not None and got_b is not None and got_b.timers is not None
    next_at = NOW + timedelta(minutes=10)
    assert (got_a.version, got_a.timers.reminders_sent, got_a.next_due_at) == (a.version + 1, 1, next_at)
    assert got_a.timers.expires_at == T0 + timedelta(days=1) and got_a.updated_at == NOW
    assert (got_b.version, got_b.timers.reminders_sent, got_b.next_due_at) == (b.version + 1, 0, b.next_due_at)
    assert await reminders_of(store, a.id) == (1, 1)
    assert await reminders_of(store, b.id) == (0, 0)


async def test_the_same_claim_written_twice_reminds_once(store: Store) -> None:
    """Two sweeps that read the same rows (as replicas would without the claim's lock): the guard decides."""
    requests = [due(T0 + timedelta(minutes=n)) for n in range(5)]
    await insert(store, *requests)
    rows = await claim(store)
    async with store.unit() as unit:
        assert await unit.write_reminders([reminded(r) for r in rows]) == [r.id for r in requests]
    async with store.unit() as unit:
        assert await unit.write_reminders([reminded(r, NOW + timedelta(seconds=1)) for r in rows]) == []
        assert unit.enqueued == 0
    for request in requests:
        got = await store.get_request(request.id)
        assert got is not None and got.timers is not None
        assert (got.version, got.timers.reminders_sent, got.updated_at) == (request.version + 1, 1, NOW)
        assert await reminders_of(store, request.id) == (1, 1)


async def test_two_stores_sweeping_at_once_remind_each_row_once(store_factory: StoreFactory) -> None:
    stores = [await store_factory(), await store_factory()]
    requests = [due(T0 + timedelta(seconds=n)) for n in range(30)]
    await insert(stores[0], *requests)

    async def sweep(s: Store) -> list[str]:
        written: list[str] = []
        while True:
            async with s.unit() as unit:
                rows = await unit.claim_due(NOW, limit=4)
                written += await unit.write_reminders([reminded(r) for r in rows])
            if not rows:
                return written
            await asyncio.sleep(0)

    results = await asyncio.gather(*(sweep(s) for s in stores for _ in range(2)))
    written = [i for r in results for i in r]
    assert sorted(written) == sorted(r.id for r in requests)  # each row once, by one of the four
    for request in requests:
        assert await reminders_of(stores[1], request.id) == (1, 1)


async def test_each_engines_reminders_are_the_reference_units_rows(db_url: str) -> None:
    """The engine's batch (storage/sqlite/writes.py, storage/postgres/writes.py) writes exactly what the
    reference form (SqlUnit.write_reminders: one guarded UPDATE per row through SQLAlchemy Core) writes:
    the raw rows of both, every column as the database holds it, a moved row left alone by both."""
    from storage.sql import SqlStore, SqlUnit
    from storage.stores import open_store
    from tests.storage.test_decided_rows import rows as request_rows

    store = await open_store(db_url)
    assert isinstance(store, SqlStore)
    try:
        pairs = [(due(T0 + timedelta(minutes=m), id=f"apr_ref_{m}"), due(T0 + timedelta(minutes=m), id=f"apr_eng_{m}"))
                 for m in (5, 10, 15)]
        await insert(store, *(r for pair in pairs for r in pair))
        moved = {"apr_ref_15", "apr_eng_15"}  # someone changed these after the claim: both ways skip them
        claimed = {row.id: row for row in await claim(store)}
        reminders = {i: reminded(row) if i not in moved else dataclasses.replace(reminded(row), expected_version=9)
                     for i, row in claimed.items()}
        async with store.unit() as unit:
            reference = await SqlUnit.write_reminders(unit, [reminders[r.id] for r, _ in pairs])
        async with store.unit() as unit:
            engine = await unit.write_reminders([reminders[e.id] for _, e in pairs])
        assert reference == ["apr_ref_5", "apr_ref_10"] and engine == ["apr_eng_5", "apr_eng_10"]
        for ref, eng in pairs:
            got_ref, got_eng = str(await request_rows(store, ref.id)), str(await request_rows(store, eng.id))
            assert got_eng.replace(eng.id, "X") == got_ref.replace(ref.id, "X")
            assert [(i.kind, i.dedupe_key.replace(eng.id, "X"), i.payload) for i in await store.outbox_items(eng.id)] == \
                [(i.kind, i.dedupe_key.replace(ref.id, "X"), i.payload) for i in await store.outbox_items(ref.id)]
    finally:
        await store.close()
