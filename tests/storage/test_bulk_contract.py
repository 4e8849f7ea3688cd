"""The bulk writes the timer sweep batches its reminders with: the same guards as one by one."""

from __future__ import annotations

from datetime import timedelta

from bot.domain.model import AuditEvent
from bot.domain.outbox import OutboxItem
from storage.base import Store
from tests.storage.test_contract import T0, make_request


async def test_update_requests_writes_only_rows_whose_version_still_matches(store: Store) -> None:
    a, b = make_request(), make_request()
    async with store.unit() as unit:
        await unit.insert_request(a)
        await unit.insert_request(b)
    later = T0 + timedelta(minutes=1)
    async with store.unit() as unit:
        assert await unit.update_requests([(a.evolve(updated_at=T0 + timedelta(seconds=1)), a.version),
                                           (b.evolve(updated_at=T0 + timedelta(seconds=1)), b.version)]) == 2
    a, b = a.evolve(version=a.version + 1), b.evolve(version=b.version + 1)
    async with store.unit() as unit:
        # b: a stale version. (The count is exact only where the driver reports executemany row counts.)
        await unit.update_requests([(a.evolve(updated_at=later), a.version), (b.evolve(updated_at=later), b.version + 7)])
    got_a, got_b = await store.get_request(a.id), await store.get_request(b.id)
    assert got_a is not None and got_b is not None
    assert (got_a.version, got_a.updated_at) == (a.version + 1, later)
    assert (got_b.version, got_b.updated_at) == (b.version, T0 + timedelta(seconds=1))


async def test_append_audits_and_enqueue_many_skip_taken_dedupe_keys(store: Store) -> None:
    r = make_request()
    async with store.unit() as unit:
        await unit.insert_request(r)
        await unit.enqueue(OutboxItem("slack.remind", "remind:1", {"request_id": r.id}, r.id, created_at=T0))
    async with store.unit() as unit:
        await unit.append_audits([AuditEvent(r.id, "reminded", T0, None, {"number": n}) for n in (1, 2)])
        await unit.enqueue_many([OutboxItem("slack.remind", key, {"request_id": r.id}, r.id, created_at=T0)
                                 for key in ("remind:1", "remind:2")])
    assert sorted(i.dedupe_key for i in await store.outbox_items(r.id)) == ["remind:1", "remind:2"]
    assert [e.data["number"] for e in await store.audit_events(r.id) if e.type == "reminded"] == [1, 2]
