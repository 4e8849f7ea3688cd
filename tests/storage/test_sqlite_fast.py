"""The store's hot statements (storage/sqlite/fast.py on SQLite: driver SQL) read and write exactly what
the SQLAlchemy statements do: a read request equals the one SQLAlchemy's REQUEST_BY_ID maps, a guarded
update leaves the same raw row as SQLAlchemy's guarded UPDATE, a lost guard writes nothing, and the
App Home users are the same set. On PostgreSQL the same checks hold for its (SQLAlchemy) path."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from bot.domain.model import Action, Actor, Change, Decision, Item, Outcome, Status, Via, Vote
from bot.domain.timing import TimerState
from storage.rows import REQUEST_BY_ID, mutable_columns, request_from_row
from storage.schema import home_users, request_people
from storage.sql import SqlStore
from storage.sql_statements import update_requests_statement
from tests.storage.test_contract import T0, full_request, insert
from tests.storage.test_decided_rows import rows


def variants() -> list[Any]:
    base = full_request()
    votes = (Vote(Actor("U1", "ann"), T0), Vote(Actor("U2", None), T0 + timedelta(seconds=1)))
    items = (Item(Action("a", {"x": 1}), key="k1", outcome=Outcome.APPROVED, decided_by=Actor("U1", "ann"),
                  changes=(Change("x", 0, 1),), params={"x": 1}, via=Via.BUTTON),
             Item(Action("b", {"é": [None, 2.5]}), allowed=("approve",), comment="non ✓"))
    timers = TimerState(reminders_sent=2, remind_at=T0 + timedelta(minutes=5), loop=1, level=2,
                        escalate_at=T0 + timedelta(hours=2), expires_at=T0 + timedelta(days=1),
                        snoozed_until=T0 + timedelta(minutes=30), escalations=3, escalated_to=("UMGR",),
                        escalated_from=("U1",), escalated_by="U9", note="late ü", handed_back=True,
                        approvers_seen=("U1", "UMGR"))
    decision = Decision(outcome=Outcome.REJECTED, params={"to": "b"}, changes=(Change("to", "a", "b"),),
                        comment="no ✗", decided_by=Actor("U3", "carol"), decided_at=T0, via=Via.MODAL,
                        votes=votes, params_sha256="c" * 64, items=items)
    return [
        base,
        base.evolve(id="apr_bare_0001", idempotency_key=None, preview=None, context=None, approvers=(), extra={},
                    card_channel=None, card_ts=None, thread_ts=None, next_due_at=None, callback_url=None),
        base.evolve(id="apr_timers_0001", idempotency_key="key-timers", timers=timers, votes=votes, items=items,
                    quorum=2, requester_may_approve=False, confirm="DELETE", requester_user="U7"),
        base.evolve(id="apr_decided_0001", idempotency_key="key-decided", status=Status.REJECTED, decision=decision),
    ]


async def generic_read(store: SqlStore, request_id: str) -> Any:
    async with store.engine.connect() as conn:
        row = (await conn.execute(REQUEST_BY_ID, {"request_id": request_id})).first()
    return request_from_row(row) if row else None


async def test_a_read_request_is_what_sqlalchemy_maps(store: SqlStore) -> None:
    requests_ = variants()
    plain = [r.evolve(decision=None, status=Status.PENDING) if r.decision else r for r in requests_]
    await insert(store, *plain)
    decided = requests_[-1]
    assert decided.decision is not None
    async with store.unit() as unit:
        await unit.insert_decision(decided.id, decided.decision)
    for request in requests_:
        fast = await store.get_request(request.id)
        assert fast is not None and fast == await generic_read(store, request.id)
        async with store.unit() as unit:
            assert await unit.get_request(request.id) == fast
    assert await store.get_request("apr_missing") is None


async def test_a_guarded_update_writes_what_sqlalchemy_writes(store: SqlStore) -> None:
    one, two = variants()[0], variants()[0].evolve(id="apr_twin_0001", idempotency_key="key-twin")
    await insert(store, one, two)
    votes = (Vote(Actor("U1", "ann"), T0),)
    timers = TimerState(reminders_sent=1, remind_at=T0 + timedelta(minutes=1), escalated_to=("UMGR",), note="ü")

    def changed(request: Any) -> Any:
        return request.evolve(status=Status.APPROVED, votes=votes, timers=timers, extra={"z": [1, {"é": None}]},
                              approvers=("U9",), updated_at=T0 + timedelta(seconds=5), next_due_at=None,
                              card_ts="1700000000.000999")

    async with store.unit() as unit:  # the production path (driver SQL on SQLite)
        assert await unit.update_request(changed(one), expected_version=one.version)
    cols = mutable_columns(changed(two))
    async with store.unit() as unit:  # SQLAlchemy's guarded UPDATE
        result = await unit.conn.execute(update_requests_statement(tuple(cols)), {
            "b_id": two.id, "b_expected": two.version, "b_version": two.version + 1,
            **{f"b_{k}": v for k, v in cols.items()}})
        assert result.rowcount == 1
    got_one, got_two = await rows(store, one.id), await rows(store, two.id)
    assert str(got_one).replace("full_0001", "X").replace("key-ü-1", "K") == \
        str(got_two).replace("twin_0001", "X").replace("key-twin", "K")
    assert await store.get_request(one.id) == (await store.get_request(two.id)).evolve(  # type: ignore[union-attr]
        id=one.id, idempotency_key=one.idempotency_key)


async def test_a_lost_guard_writes_nothing(store: SqlStore) -> None:
    request = variants()[0]
    await insert(store, request)
    before = await rows(store, request.id)
    async with store.unit() as unit:
        stale = request.evolve(status=Status.APPROVED, updated_at=T0 + timedelta(seconds=1))
        assert not await unit.update_request(stale, expected_version=request.version + 1)
    assert await rows(store, request.id) == before


async def test_home_users_of_a_request(store: SqlStore) -> None:
    request = variants()[0]
    await insert(store, request)
    async with store.unit() as unit:
        await unit.add_people(request.id, "approver", ["U1", "U2", "U3"], T0)
        for user in ("U2", "U3", "U8", "U9"):
            await unit.open_home(user, T0)
    async with store.unit() as unit:
        assert await unit.home_users_of(request.id) == {"U2", "U3"}
        assert await unit.home_users_of(request.id, ["U9", "U9", "U4"]) == {"U2", "U3", "U9"}
        assert await unit.home_users_of("apr_missing", ["U8"]) == {"U8"}
        assert await unit.home_users_of("apr_missing") == set()
    async with store.engine.connect() as conn:  # what SQLAlchemy's join reads
        people = sa.select(request_people.c.user_id).where(request_people.c.request_id == request.id)
        found = await conn.execute(sa.select(home_users.c.user_id).where(home_users.c.user_id.in_(people)))
        generic = set(found.scalars())
    assert generic == {"U2", "U3"}
