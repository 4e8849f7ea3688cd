"""storage/decided.py writes a policy-decided request exactly as the generic inserts do: the raw
rows of both ways, every column as the database holds it (JSON text, timestamps), are the same."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from bot.domain.model import Actor, AuditEvent, Decision, Outcome, Request, Status, Via
from storage.base import DuplicateIdempotencyKey, Unit
from storage.schema import audit_events, decisions, requests
from storage.sql import SqlStore
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
    store = await SqlStore.open(db_url)
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
    store = await SqlStore.open(db_url)
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
