"""Each engine (storage/<engine>/writes.py) writes a new pending request exactly as the generic calls do (insert_request,
append_audit, enqueue, add_people, home_users + enqueue): the raw rows of both ways, every column as the
database holds it (JSON text, timestamps), are the same, on both engines."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from bot.outbox import effects
from bot.domain.grants import Grant, Scope
from bot.domain.model import AuditEvent, Request
from bot.approvals.homes import home_candidates
from storage.base import DuplicateIdempotencyKey, Expect, StaleRead, Unit
from storage.grants import DELEGATION_STAMP, GRANT_STAMP, GrantStore
from storage.schema import outbox, request_people
from storage.sql import SqlStore
from storage.stores import open_store
from tests.storage.test_contract import T0, full_request
from tests.storage.test_decided_rows import rows as request_rows
from tests.storage.test_shared_decisions import count_commits

PEOPLE = ["U3", "U1", "U2", "U1", "U9"]  # U1 twice; U1 and U3 have opened App Home, U2 and U9 not


def pending(request_id: str, key: str | None) -> tuple[Request, AuditEvent]:
    base = full_request()
    params = {**base.action.params, "big": 10**30, "nested": [{"é": None}, 1.5, True]}
    request = base.evolve(id=request_id, idempotency_key=key, card_channel=None, card_ts=None,
                          action=base.action.__class__(base.action.name, params, base.action.params_schema))
    return request, AuditEvent(request_id, "created", T0, "agent-ü", {"risk": "critical"})


async def write(unit: Unit, request: Request, audit: AuditEvent, *, generic: bool,
                expect: Expect | None = None) -> None:
    insert = Unit.insert_pending if generic else type(unit).insert_pending
    await insert(unit, request, audit, effects.post_card(request.id, T0), PEOPLE,
                 home_candidates(PEOPLE, f"{request.id}:v{request.version}", T0),
                 expects=(expect,) if expect is not None else ())


async def rows(store: SqlStore, request_id: str) -> str:
    """Every row the request has (requests, decisions, audit, outbox, request_people), ids left out."""
    out: list[Any] = await request_rows(store, request_id)
    async with store.engine.connect() as conn:
        for table, key, order in ((outbox, outbox.c.dedupe_key.like(f"%{request_id}%"), outbox.c.id),
                                  (request_people, request_people.c.request_id == request_id,
                                   request_people.c.user_id)):
            cols = [sa.cast(c, sa.Text).label(c.name) for c in table.c if c.name != "id"]
            out.append([tuple(r) for r in (await conn.execute(sa.select(*cols).where(key).order_by(order))).all()])
    return str(out)


async def test_pending_rows_are_the_generic_calls_rows(db_url: str) -> None:
    store = await open_store(db_url)
    try:
        async with store.unit() as unit:
            for user in ("U1", "U3"):
                await unit.open_home(user, T0)
        written = {}
        for way, request_id in (("generic", "apr_generic_0001"), ("one", "apr_pending_0001")):
            request, audit = pending(request_id, f"key-{way}")
            async with store.unit() as unit:  # U3's refresh is queued already: skipped both ways
                await unit.enqueue(effects.publish_home("U3", f"{request_id}:v{request.version}", T0))
            async with store.unit() as unit:
                await write(unit, request, audit, generic=way == "generic")
                assert unit.enqueued >= 1  # the dispatcher is woken on commit
            written[way] = await rows(store, request_id)
            got = await store.outbox_items()
            mine = [i.dedupe_key for i in got if request_id in i.dedupe_key]
            v = request.version
            assert mine == [f"home:U3:{request_id}:v{v}", f"post:{request_id}", f"home:U1:{request_id}:v{v}"]
        assert "U9" in written["one"] and "key-one" in written["one"]
        assert written["one"].replace("pending_0001", "X").replace("key-one", "K") == \
            written["generic"].replace("generic_0001", "X").replace("key-generic", "K")
        one = await store.get_request("apr_pending_0001")
        generic = await store.get_request("apr_generic_0001")
        assert one is not None and generic is not None and one == generic.evolve(id=one.id, idempotency_key="key-one")
    finally:
        await store.close()


async def test_no_people_and_nobody_at_home(db_url: str) -> None:
    store = await open_store(db_url)
    try:
        for way, request_id in (("generic", "apr_generic_0002"), ("one", "apr_pending_0002")):
            request, audit = pending(request_id, None)
            async with store.unit() as unit:
                insert = Unit.insert_pending if way == "generic" else type(unit).insert_pending
                await insert(unit, request, audit, effects.post_card(request_id, T0), [], [])
        one, generic = await rows(store, "apr_pending_0002"), await rows(store, "apr_generic_0002")
        assert one.replace("pending_0002", "X") == generic.replace("generic_0002", "X")
        assert [i.kind for i in await store.outbox_items("apr_pending_0002")] == ["slack.post_card"]
    finally:
        await store.close()


@pytest.mark.parametrize("generic", [False, True])
async def test_a_taken_idempotency_key_writes_nothing(db_url: str, generic: bool) -> None:
    store = await open_store(db_url)
    try:
        async with store.unit() as unit:
            await unit.open_home("U1", T0)
        first, audit = pending("apr_pending_0003", "key-taken")
        async with store.unit() as unit:
            await write(unit, first, audit, generic=generic)
        second, audit = pending("apr_pending_0004", "key-taken")
        with pytest.raises(DuplicateIdempotencyKey):
            async with store.unit() as unit:
                await write(unit, second, audit, generic=generic)
        assert await store.get_request(second.id) is None and await store.audit_events(second.id) == []
        assert await store.outbox_items(second.id) == []
        assert "apr_pending_0004" not in str([i.dedupe_key for i in await store.outbox_items()])  # no Home item
        async with store.engine.connect() as conn:
            people = (await conn.execute(sa.select(sa.func.count()).where(
                request_people.c.request_id == second.id))).scalar()
        assert people == 0
    finally:
        await store.close()


@pytest.mark.parametrize("generic", [False, True])
async def test_a_moved_stamp_raises_stale_read_and_writes_nothing(db_url: str, generic: bool) -> None:
    """`expect` (the gate's delegation stamp): read with the write (in its statement on PostgreSQL); if
    it moved, StaleRead and the unit rolls back; if not, the rows are written."""
    store = await open_store(db_url)
    grants = GrantStore(store)
    try:
        async with store.unit() as unit:
            stamp = await grants.delegation_stamp_in(unit)
        await grants.away("U1", "U3", None, T0)  # another replica's change: the stamp moves
        stale, audit = pending("apr_pending_0005", None)
        with pytest.raises(StaleRead):
            async with store.unit() as unit:
                await write(unit, stale, audit, generic=generic, expect=Expect(grants.delegation_stamp_in,
                                                                                DELEGATION_STAMP, stamp))
        assert await store.get_request(stale.id) is None and await store.outbox_items(stale.id) == []
        async with store.unit() as unit:
            stamp = await grants.delegation_stamp_in(unit)
        fresh, audit = pending("apr_pending_0006", None)
        async with store.unit() as unit:
            await write(unit, fresh, audit, generic=generic, expect=Expect(grants.delegation_stamp_in,
                                                                            DELEGATION_STAMP, stamp))
        assert await store.get_request(fresh.id) is not None
    finally:
        await store.close()


@pytest.mark.parametrize("moved", ["nothing", "grants", "delegations"])
async def test_a_lone_pending_submit_verifies_both_stamps_and_writes_nothing_if_one_moved(db_url: str,
                                                                                          moved: str) -> None:
    """The gate's pending submit on its own (`Store.run_change`): on PostgreSQL ONE statement, its own
    transaction, that verifies the tool's grant stamp and the delegation stamp in its snapshot; a moved
    one fails the statement (StaleRead) and nothing of it is written. On SQLite the unit reads both first."""
    store = await open_store(db_url)
    grants = GrantStore(store)
    try:
        request, audit = pending(f"apr_pending_lone_{moved}", None)
        tool = request.action.name
        async with store.unit() as unit:
            expected = (await grants.stamp_in(unit, tool), await grants.delegation_stamp_in(unit))
        if moved == "grants":  # another replica grants this tool meanwhile
            async with store.unit() as unit:
                await grants.add(unit, Grant("grt_lone", tool, {}, Scope.EVERYONE, None, "U1", T0))
        elif moved == "delegations":
            await grants.away("U1", "U3", None, T0)
        expects = (Expect(lambda unit: grants.stamp_in(unit, tool), GRANT_STAMP, expected[0], (tool,)),
                   Expect(grants.delegation_stamp_in, DELEGATION_STAMP, expected[1]))
        commits = count_commits(store)

        async def submit() -> None:
            await store.run_change(lambda unit: unit.insert_pending(
                request, audit, effects.post_card(request.id, T0), PEOPLE,
                home_candidates(PEOPLE, f"{request.id}:v{request.version}", T0), expects=expects))

        if moved == "nothing":
            await submit()
            assert await store.get_request(request.id) is not None
            assert [i.dedupe_key for i in await store.outbox_items(request.id)] == [f"post:{request.id}"]
        else:
            with pytest.raises(StaleRead):
                await submit()
            assert await store.get_request(request.id) is None and await store.outbox_items(request.id) == []
            assert await store.audit_events(request.id) == []
        # PostgreSQL: nothing begun or committed; SQLite: the unit commits, or rolls back on a moved stamp.
        assert len(commits) == (0 if store.dialect == "postgresql" or moved != "nothing" else 1)
    finally:
        await store.close()
