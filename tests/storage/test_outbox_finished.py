"""Deliveries that had nothing else to write end in ONE statement on PostgreSQL (`Store.outbox_finished`,
storage/postgres/outbox.py) and in a unit on SQLite: their audit rows and their done marks, both or neither,
as the unit wrote them. The outbox dispatcher takes that way for a group of such results."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from bot.outbox import effects
from bot.process.clock import SystemClock
from bot.domain.model import Action, AuditEvent, Risk
from bot.process.metrics import Metrics
from bot.approvals.outbox_rows import OutboxRows
from bot.outbox.dispatcher import Dispatcher, Done
from bot.approvals.service import ApprovalSpec, Service
from bot.domain.outbox import OutboxItem
from storage.base import CardPosted
from storage.schema import outbox, requests
from storage.sql import SqlStore
from tests.storage.test_shared_decisions import count_commits


async def claimed(store: SqlStore, n: int) -> list[OutboxItem]:
    """The card posts of `n` new requests, claimed as the dispatcher claims them."""
    service = Service(store)
    ids = [(await service.submit(ApprovalSpec(action=Action("deploy", {"n": i}), summary=f"deploy {i}",
                                              risk=Risk.HIGH, channel="C1", approvers=("U1",))))[0].id
           for i in range(n)]
    items = await store.claim_outbox(datetime.now(UTC), limit=100, lease_seconds=60)
    mine = sorted((i for i in items if i.request_id in ids), key=lambda i: ids.index(i.request_id or ""))
    assert len(mine) == n
    return mine


async def marks(store: SqlStore, items: list[OutboxItem]) -> list[tuple[str, datetime | None, datetime | None]]:
    async with store.engine.connect() as conn:
        rows = (await conn.execute(sa.select(outbox.c.id, outbox.c.status, outbox.c.done_at, outbox.c.lease_until)
                                   .where(outbox.c.id.in_([i.id for i in items])))).all()
    by_id = {r.id: (r.status, r.done_at, r.lease_until) for r in rows}
    return [by_id[i.id] for i in items]


async def test_the_rows_and_marks_are_written_as_the_unit_writes_them(store: SqlStore) -> None:
    items = await claimed(store, 4)
    now = datetime(2026, 12, 1, 5, 30, 0, 123456, tzinfo=UTC)
    audits = [AuditEvent(i.request_id or "", "card_updated", now + timedelta(microseconds=k), None,
                         {"status": "pending", "n": k, "text": "Zoë \u2014 50 %"}) for k, i in enumerate(items)]
    commits = count_commits(store)
    await store.outbox_finished([(i.id or 0, now) for i in items[:2]], audits[:2])
    # PostgreSQL: one statement, its own transaction (nothing begun or committed); SQLite: its unit.
    assert len(commits) == (0 if store.dialect == "postgresql" else 1)
    async with store.unit() as unit:  # the other two the way the dispatcher wrote every group before
        await unit.append_audits(audits[2:])
        await unit.outbox_done_many([(i.id or 0, now) for i in items[2:]])
    assert await marks(store, items) == [("done", now, None)] * 4
    for item, audit in zip(items, audits, strict=True):
        assert (await store.audit_events(item.request_id or ""))[-1] == audit


async def test_a_row_that_cannot_be_written_leaves_everything_as_it_was(store: SqlStore) -> None:
    items = await claimed(store, 2)
    before = await marks(store, items)
    audits_before = [len(await store.audit_events(i.request_id or "")) for i in items]
    now = datetime.now(UTC)
    bad = [AuditEvent(items[0].request_id or "", "card_updated", now, None, {}),
           AuditEvent(items[1].request_id or "", None, now, None, {})]  # type: ignore[arg-type]  # NOT NULL
    with pytest.raises(sa.exc.IntegrityError):
        await store.outbox_finished([(i.id or 0, now) for i in items], bad)
    assert await marks(store, items) == before and before[0][0] == "pending"
    assert [len(await store.audit_events(i.request_id or "")) for i in items] == audits_before


async def test_the_dispatcher_writes_such_results_that_way(store: SqlStore) -> None:
    service = Service(store)
    request, _ = await service.submit(ApprovalSpec(action=Action("deploy", {}), summary="deploy", risk=Risk.HIGH,
                                                   channel="C1", approvers=("U1",)))
    done = AuditEvent(request.id, "card_updated", datetime.now(UTC), None, {"status": "pending"})
    delivered: list[str] = []

    async def handler(item: OutboxItem) -> Done:
        delivered.append(item.dedupe_key)
        return Done(audit=(done,))

    handlers = {kind: handler for kind in effects.KINDS}
    dispatcher = Dispatcher(OutboxRows(store), handlers, clock=SystemClock(), metrics=Metrics())
    commits = count_commits(store)
    await dispatcher.drain()
    assert delivered == [f"post:{request.id}"]
    assert [i.status for i in await store.outbox_items(request.id)] == ["done"]
    assert (await store.audit_events(request.id))[-1] == done
    if store.dialect == "postgresql":  # the claim and the result: each one statement, no transaction begun
        assert len(commits) == 0


async def raw_request(store: SqlStore, request_id: str) -> tuple[object, ...]:
    async with store.engine.connect() as conn:
        row = (await conn.execute(sa.select(requests.c.card_channel, requests.c.card_ts, requests.c.updated_at,
                                            requests.c.version).where(requests.c.id == request_id))).one()
    return tuple(row)


async def test_card_posts_are_stored_and_audited_as_the_unit_does_it(store: SqlStore) -> None:
    """Four card posts' results: two through `outbox_finished` (one statement on PostgreSQL), two through
    a unit the way the dispatcher wrote them before; the rows come out the same."""
    items = await claimed(store, 4)
    now = datetime(2026, 12, 1, 7, 0, 0, 654321, tzinfo=UTC)
    cards = [(CardPosted(i.request_id or "", f"C{k}", f"1700000000.00010{k}"), now + timedelta(seconds=k))
             for k, i in enumerate(items)]
    versions = [(await raw_request(store, i.request_id or ""))[3] for i in items]
    commits = count_commits(store)
    stored = await store.outbox_finished([(i.id or 0, now) for i in items[:2]], [], cards[:2])
    assert stored == {i.request_id for i in items[:2]}
    assert len(commits) == (0 if store.dialect == "postgresql" else 1)
    async with store.unit() as unit:
        for card, at in cards[2:]:
            assert await unit.record_card(card, at)
        await unit.outbox_done_many([(i.id or 0, now) for i in items[2:]])
    assert await marks(store, items) == [("done", now, None)] * 4
    for (card, at), version in zip(cards, versions, strict=True):
        assert await raw_request(store, card.request_id) == (card.channel, card.ts, at, version + 1)
        assert (await store.audit_events(card.request_id))[-1] == card.audit(at)


async def test_a_stored_card_is_kept_and_not_audited_again(store: SqlStore) -> None:
    """The guard: a second post's ts never replaces the first, and only a stored ts is audited. The
    done marks and the other rows are written all the same."""
    items = await claimed(store, 2)
    first, second = items
    now = datetime.now(UTC)
    async with store.unit() as unit:
        assert await unit.record_card(CardPosted(first.request_id or "", "C1", "1700000000.000001"), now)
    before = await raw_request(store, first.request_id or "")
    audits_before = await store.audit_events(first.request_id or "")
    updated = AuditEvent(second.request_id or "", "card_updated", now, None, {"status": "pending"})
    later = now + timedelta(seconds=1)
    assert await store.outbox_finished([(i.id or 0, later) for i in items], [updated],
                                [(CardPosted(first.request_id or "", "C9", "1700000000.000999"), later),
                                 (CardPosted(second.request_id or "", "C2", "1700000000.000002"), later),
                                 (CardPosted("apr_no_such_request", "C3", "1700000000.000003"), later)]) \
        == {second.request_id}  # only the card it stored
    assert await raw_request(store, first.request_id or "") == before
    assert await store.audit_events(first.request_id or "") == audits_before
    assert (await raw_request(store, second.request_id or ""))[:2] == ("C2", "1700000000.000002")
    assert [e.type for e in (await store.audit_events(second.request_id or ""))[-2:]] == ["posted", "card_updated"]
    assert await store.audit_events("apr_no_such_request") == []
    assert await marks(store, items) == [("done", later, None)] * 2


async def test_a_group_that_cannot_be_written_leaves_the_cards_as_they_were(store: SqlStore) -> None:
    """An audit row that cannot be written fails the whole group: no ts, no audit row, no done mark.
    On PostgreSQL a channel id longer than its column fails it too (it is not cut to fit by a cast);
    SQLite does not check lengths."""
    items = await claimed(store, 2)
    before = [await raw_request(store, i.request_id or "") for i in items]
    audits_before = [await store.audit_events(i.request_id or "") for i in items]
    marks_before = await marks(store, items)
    now = datetime.now(UTC)
    cards = [(CardPosted(i.request_id or "", f"C{k}", f"1700000000.00000{k}"), now) for k, i in enumerate(items)]
    bad = AuditEvent(items[1].request_id or "", None, now, None, {})  # type: ignore[arg-type]  # NOT NULL
    with pytest.raises(sa.exc.IntegrityError):
        await store.outbox_finished([(i.id or 0, now) for i in items], [bad], cards)
    if store.dialect == "postgresql":
        too_long = [cards[0], (CardPosted(items[1].request_id or "", "C" * 41, "1700000000.000002"), now)]
        with pytest.raises(sa.exc.DBAPIError, match="too long"):
            await store.outbox_finished([(i.id or 0, now) for i in items], [], too_long)
    assert [await raw_request(store, i.request_id or "") for i in items] == before
    assert [await store.audit_events(i.request_id or "") for i in items] == audits_before
    assert await marks(store, items) == marks_before


async def test_the_dispatcher_writes_card_posts_that_way(store: SqlStore) -> None:
    service = Service(store)
    request, _ = await service.submit(ApprovalSpec(action=Action("deploy", {}), summary="deploy", risk=Risk.HIGH,
                                                   channel="C1", approvers=("U1",)))

    async def handler(item: OutboxItem) -> Done:
        return Done(card=CardPosted(item.request_id or "", "C1", "1700000000.000100"))

    dispatcher = Dispatcher(OutboxRows(store), dict.fromkeys(effects.KINDS, handler), clock=SystemClock(), metrics=Metrics())
    commits = count_commits(store)
    await dispatcher.drain()
    stored = await store.get_request(request.id)
    assert stored is not None and (stored.card_channel, stored.card_ts) == ("C1", "1700000000.000100")
    assert [i.status for i in await store.outbox_items(request.id)] == ["done"]
    assert (await store.audit_events(request.id))[-1].type == "posted"
    if store.dialect == "postgresql":
        assert len(commits) == 0
