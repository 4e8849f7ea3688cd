"""Each engine (storage/<engine>/writes.py) writes a policy-decided request exactly as the generic inserts do: the raw
rows of both ways, every column as the database holds it (JSON text, timestamps), are the same."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from bot.outbox import effects
from bot.domain.model import Actor, AuditEvent, Decision, Outcome, Request, Status, Via
from storage.base import DuplicateIdempotencyKey, Unit
from storage.schema import audit_events, decisions, outbox, requests
from storage.sql import SqlStore
from storage.stores import open_store
from tests.storage.test_contract import T0, full_request


def decided(request_id: str, key: str | None) -> tuple[Request, list[AuditEvent]]:
    base = full_request()
    params = {**base.action.params, "big": 10**30, "nested": [{"é": None}, 1.5, True]}
    request = base.evolve(id=request_id, idempotency_key=key, action=base.action.__class__(
        base.action.name, params, base.action.params_schema), card_channel=None, card_ts=None, next_due_at=None)
    decision = Decision(outcome=Outcome.APPROVED, params=params, changes=(), comment="ok ✓",
                        decided_by=Actor("U1", "ann"), decided_at=T0, via=Via.POLICY, params_sha256="f" * 64)
    request = request.evolve(status=Status.APPROVED, decision=decision)
    events = [AuditEvent(request_id, "created", T0, "agent-ü", {"risk": "critical"}),
              AuditEvent(request_id, "decided", T0, None, {"outcome": "approved", "grant_id": None, "n": [1, 2.5]})]
    return request, events


async def rows(store: SqlStore, request_id: str) -> list[Any]:
    """Every column of the request's rows as text (the database's own rendering), ids left out."""
    out = []
    async with store.engine.connect() as conn:
        for table, key in ((requests, requests.c.id), (decisions, decisions.c.request_id),
                           (audit_events, audit_events.c.request_id)):
            cols = [sa.cast(c, sa.Text).label(c.name) for c in table.c if c.name not in ("id", "request_id")]
            order = [table.c.id] if table is audit_events else []
            found = (await conn.execute(sa.select(*cols).where(key == request_id).order_by(*order))).all()
            out.append([tuple(r) for r in found])
    return out


async def test_decided_rows_are_the_generic_inserts_rows(db_url: str) -> None:
    store = await open_store(db_url)
    try:
        slow, slow_events = decided("apr_generic_0001", "key-generic")
        fast, fast_events = decided("apr_decided_0001", "key-decided")
        async with store.unit() as unit:
            await Unit.insert_decided(unit, slow, slow_events)  # the generic way: four calls
        async with store.unit() as unit:
            await unit.insert_decided(fast, fast_events)
        got_slow, got_fast = await rows(store, slow.id), await rows(store, fast.id)
        assert all(got_slow) and [len(t) for t in got_slow] == [1, 1, 2]
        assert str(got_fast).replace("decided_0001", "X").replace("key-decided", "K") == \
            str(got_slow).replace("generic_0001", "X").replace("key-generic", "K")
        assert await store.get_request(fast.id) == (await store.get_request(slow.id)).evolve(  # type: ignore[union-attr]
            id=fast.id, idempotency_key="key-decided")
    finally:
        await store.close()


async def test_a_taken_idempotency_key_writes_nothing(db_url: str) -> None:
    store = await open_store(db_url)
    try:
        first, events = decided("apr_decided_0002", "key-taken")
        async with store.unit() as unit:
            await unit.insert_decided(first, events)
        second, events = decided("apr_decided_0003", "key-taken")
        with pytest.raises(DuplicateIdempotencyKey):
            async with store.unit() as unit:
                await unit.insert_decided(second, events)
        assert await store.get_request(second.id) is None and await store.audit_events(second.id) == []
    finally:
        await store.close()


async def outbox_rows(store: SqlStore, request_id: str) -> list[Any]:
    async with store.engine.connect() as conn:
        cols = [sa.cast(c, sa.Text).label(c.name) for c in outbox.c if c.name not in ("id", "request_id")]
        found = await conn.execute(sa.select(*cols).where(outbox.c.request_id == request_id).order_by(outbox.c.id))
        return [tuple(r) for r in found.all()]


async def test_a_decisions_rows_are_the_generic_inserts_rows(db_url: str) -> None:
    """`record_decision` (one statement on PostgreSQL) writes what the separate inserts write: the
    decision, its audit row and its outbox items, a dedupe_key already taken skipped as by `enqueue`."""
    store = await open_store(db_url)
    try:
        written = {}
        for way, request_id in (("generic", "apr_generic_0004"), ("one", "apr_decided_0004")):
            pending, _ = decided(request_id, None)
            pending = pending.evolve(status=Status.PENDING, decision=None)
            async with store.unit() as unit:
                await unit.insert_request(pending)
            decision = Decision(outcome=Outcome.APPROVED, params={"to": "a@example.com", "n": 10**20},
                                changes=(), comment="fine ✓", decided_by=Actor("U1", "ann"), decided_at=T0,
                                via=Via.BUTTON, params_sha256="e" * 64)
            audit = AuditEvent(request_id, "decided", T0, "U1", {"outcome": "approved", "changes": []})
            items = [effects.update_card(request_id, f"card:{request_id}:decided", T0),
                     effects.webhook(request_id, f"webhook:{request_id}:decided", T0, url="https://x.example/h",
                                     body={"type": "approval.decided", "é": [1, 2.5, None]}),
                     effects.publish_home("U2", f"{request_id}:decided", T0)]
            async with store.unit() as unit:  # one key taken already: skipped, the others written
                await unit.enqueue(items[2])
            async with store.unit() as unit:
                record = Unit.record_decision if way == "generic" else type(unit).record_decision
                await record(unit, request_id, decision, audit, items)
                assert unit.enqueued >= 2  # the dispatcher is woken on commit
            queued = await outbox_rows(store, request_id)
            assert [r[0] for r in queued] == ["slack.update_card", "webhook"]  # the home's key was taken
            async with store.engine.connect() as conn:
                homes = (await conn.execute(sa.select(sa.func.count()).where(
                    outbox.c.dedupe_key == items[2].dedupe_key))).scalar()
            assert homes == 1
            written[way] = str(await rows(store, request_id)) + str(queued)
        assert written["one"].replace("decided_0004", "X") == written["generic"].replace("generic_0004", "X")
    finally:
        await store.close()
