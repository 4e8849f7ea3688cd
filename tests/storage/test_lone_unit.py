"""One change run by the store (`Store.run_change`; on PostgreSQL storage/postgres/lone_unit.py), on the real
store of both engines. On PostgreSQL a lone decision is one statement and its own transaction: nothing
for the store to begin or commit, yet what it writes, who is woken and what runs after the commit are
those of a unit. A change of several statements is one transaction, rolled back as a whole when it
raises; a statement after a write that ends its change (a decision with no `then`) is refused before it
is sent, and a decision's `then` is written in the decision's transaction. On SQLite a change is an
ordinary unit (one writer, BEGIN IMMEDIATE): the same outcomes."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from functools import partial

import pytest

from bot.outbox import effects
from bot.domain.model import Action, Actor, AuditEvent, Decision, Outcome, Risk, Status, Via
from bot.approvals.service import ApprovalSpec, Service
from storage.base import Unit
from storage.sql import SqlStore
from tests.storage.test_shared_decisions import count_commits


def spec(n: int, *, quorum: int = 1) -> ApprovalSpec:
    return ApprovalSpec(action=Action("deploy", {"n": n}), summary=f"deploy {n}", risk=Risk.HIGH, channel="C1",
                        approvers=("U1", "U2"), quorum=quorum)


async def test_a_lone_decision_is_one_statement_with_the_effects_of_a_unit(store: SqlStore) -> None:
    service = Service(store)
    request, _ = await service.submit(spec(1))
    decided: list[str] = []
    service.on_decided(lambda r: decided.append(r.id))
    waiting = asyncio.create_task(service.wait(request.id, 30))
    for _ in range(1000):  # until the wait registered (turns of the loop, no time)
        if request.id in service.waiters.waited_ids():
            break
        await asyncio.sleep(0)
    assert request.id in service.waiters.waited_ids()
    commits = count_commits(store)
    result = await service.decide(request.id, Outcome.APPROVED, via=Via.BUTTON, actor=Actor("U1", "ann"))
    assert result.won
    # PostgreSQL: no transaction of the store's (the statement committed by itself); SQLite: its unit.
    assert len(commits) == (0 if store.dialect == "postgresql" else 1)
    woken = await asyncio.wait_for(waiting, 5)  # woken by the commit, handed the decided request
    assert woken.status.value == "approved" and woken == await store.get_request(request.id)
    assert decided == [request.id]  # the after-commit hooks ran
    assert [e.type for e in await store.audit_events(request.id)].count("decided") == 1
    assert [i.dedupe_key for i in await store.outbox_items(request.id)
            if i.dedupe_key.endswith(":decided")], "the card update was enqueued"


async def test_a_lone_decision_that_lost_its_guard_writes_nothing_and_is_decided_again(store: SqlStore) -> None:
    service = Service(store)
    request, _ = await service.submit(spec(2))
    stale = await service.get(request.id)
    async with store.unit() as unit:  # someone else writes first: the version moves
        assert await unit.update_request(stale.evolve(card_ts="1700000000.000001"), expected_version=stale.version)
    result = await service.decide(request.id, Outcome.REJECTED, via=Via.API, comment="no", read=stale)
    assert result.won and result.request.version == stale.version + 2
    stored = await store.get_request(request.id)
    assert stored is not None and stored.card_ts == "1700000000.000001" and stored.status.value == "rejected"
    assert [e.type for e in await store.audit_events(request.id)].count("decided") == 1


async def test_the_vote_that_reaches_a_quorum_writes_its_vote_in_the_same_transaction(store: SqlStore) -> None:
    service = Service(store)
    request, _ = await service.submit(spec(3, quorum=2))
    first = await service.decide(request.id, Outcome.APPROVED, via=Via.BUTTON, actor=Actor("U1", "ann"))
    assert first.counted
    commits = count_commits(store)
    second = await service.decide(request.id, Outcome.APPROVED, via=Via.BUTTON, actor=Actor("U2", "bob"))
    assert second.won and len(commits) == 1  # the decision and the vote: one transaction on both engines
    stored = await store.get_request(request.id)
    assert stored is not None and stored.status.value == "approved"
    assert [v.voter.id for v in stored.votes] == ["U1", "U2"]


async def test_a_lone_unit_of_several_statements_is_one_transaction(store: SqlStore) -> None:
    service = Service(store)
    request, _ = await service.submit(spec(4))
    now = datetime.now(UTC)

    async def two(unit: Unit, fail: bool = False) -> None:
        await unit.append_audit(AuditEvent(request.id, "one", now))
        await unit.append_audit(AuditEvent(request.id, "two", now))
        if fail:
            raise RuntimeError("the change failed after the first write")

    with pytest.raises(RuntimeError, match="after the first write"):
        await store.run_change(partial(two, fail=True))
    assert [e.type for e in await store.audit_events(request.id)] == ["created"]  # both rolled back
    commits = count_commits(store)
    await store.run_change(two)
    assert len(commits) == 1
    assert [e.type for e in await store.audit_events(request.id)] == ["created", "one", "two"]


async def test_nothing_follows_a_decision_that_ends_its_change(store: SqlStore) -> None:
    service = Service(store)
    request, _ = await service.submit(spec(5))
    now = datetime.now(UTC)
    read = await service.get(request.id)
    decision = Decision(outcome=Outcome.APPROVED, params=read.action.params, changes=(), comment=None,
                        decided_by=None, decided_at=now, via=Via.API, votes=(), params_sha256="0" * 64, items=())
    decided = read.evolve(status=Status.APPROVED, decision=decision)
    audit = AuditEvent(request.id, "decided", now)

    home = partial(effects.publish_home, key=f"{request.id}:decided", now=now)

    async def decide_then_write(unit: Unit) -> None:
        assert await unit.decide_request(decided, read.version, audit, [], home=home)
        await unit.append_audit(AuditEvent(request.id, "after", now))

    if store.dialect == "postgresql":
        with pytest.raises(RuntimeError, match="after the unit's sole statement"):
            await store.run_change(decide_then_write)
        types = [e.type for e in await store.audit_events(request.id)]
        assert types == ["created", "decided"]  # the sole statement committed by itself; "after" never sent
    else:  # SQLite's change is a unit: both statements commit together
        await store.run_change(decide_then_write)
        assert [e.type for e in await store.audit_events(request.id)] == ["created", "decided", "after"]


@pytest.mark.parametrize("then_fails", [False, True])
async def test_a_decisions_then_is_written_in_its_transaction(store: SqlStore, then_fails: bool) -> None:
    """What a decision writes besides itself (`then`: a vote, a grant) commits with it, or, when it
    raises, takes the decision down with it: on PostgreSQL the decision is then not a sole statement."""
    service = Service(store)
    request, _ = await service.submit(spec(8))
    now = datetime.now(UTC)
    read = await service.get(request.id)
    decision = Decision(outcome=Outcome.APPROVED, params=read.action.params, changes=(), comment=None,
                        decided_by=None, decided_at=now, via=Via.API, votes=(), params_sha256="0" * 64, items=())
    decided = read.evolve(status=Status.APPROVED, decision=decision)
    home = partial(effects.publish_home, key=f"{request.id}:decided", now=now)

    async def then(unit: Unit) -> None:
        await unit.append_audit(AuditEvent(request.id, "then", now))
        if then_fails:
            raise LookupError("then failed")

    async def change(unit: Unit) -> bool:
        return await unit.decide_request(decided, read.version, AuditEvent(request.id, "decided", now), [],
                                         home=home, then=then)

    commits = count_commits(store)
    if then_fails:
        with pytest.raises(LookupError):
            await store.run_change(change)
        assert [e.type for e in await store.audit_events(request.id)] == ["created"]
        assert (await service.get(request.id)).status is Status.PENDING
        assert len(commits) == 0
    else:
        assert await store.run_change(change) is True
        assert [e.type for e in await store.audit_events(request.id)] == ["created", "decided", "then"]
        assert len(commits) == 1  # one transaction, begun and committed, on both engines


async def test_a_task_writing_unit_after_unit_lets_other_tasks_run(store: SqlStore) -> None:
    """SQLite's statements run on the loop (storage/sqlite/driver.py), so a unit must still yield to it
    somewhere (its pool checkout does), or a writer in a loop would starve every other task: a unit on a
    held writer connection did, and bench.all's raw tx/s writers never stopped."""
    service = Service(store)
    request, _ = await service.submit(spec(6))
    now = datetime.now(UTC)
    other_ran_at: list[int] = []
    written = 0

    async def writer() -> None:
        nonlocal written
        for _ in range(200):
            async with store.unit() as unit:
                await unit.append_audit(AuditEvent(request.id, "loop", now))
            written += 1

    async def other() -> None:
        other_ran_at.append(written)

    task = asyncio.create_task(writer())
    await asyncio.sleep(0)  # the writer starts
    await asyncio.gather(other(), task)
    assert other_ran_at and other_ran_at[0] < 200, other_ran_at


async def test_a_unit_whose_connection_broke_leaves_the_next_unit_a_working_one(store: SqlStore) -> None:
    """A unit that ends on an invalidated connection (SQLAlchemy invalidates one on a disconnect) raises
    and writes nothing, and the next unit works: on SQLite that is the connection the writer keeps
    between units (storage/sqlite_engine.SqliteWriter)."""
    service = Service(store)
    request, _ = await service.submit(spec(7))
    now = datetime.now(UTC)
    with pytest.raises(Exception):  # noqa: B017 - whichever error the broken connection gives
        async with store.unit() as unit:
            await unit.append_audit(AuditEvent(request.id, "lost", now))
            await unit.conn.invalidate()
    async with store.unit() as unit:
        await unit.append_audit(AuditEvent(request.id, "kept", now))
    types = [e.type for e in await store.audit_events(request.id)]
    assert "kept" in types and "lost" not in types


async def test_a_vote_as_a_lone_units_first_statement_is_stored_once(store: SqlStore) -> None:
    """insert_vote opens a savepoint (begin_nested): in a lone unit that is also its first statement
    (the connection not checked out yet), and a second vote by the same person is refused, not raised."""
    from bot.domain.model import Vote

    request, _ = await Service(store).submit(spec(5, quorum=2))
    vote = Vote(Actor("U1", "ann"), datetime.now(UTC))

    async def vote_once(unit: Unit) -> bool:
        return await unit.insert_vote(request.id, vote)

    assert await store.run_change(vote_once) is True
    assert await store.run_change(vote_once) is False
    async with store.engine.connect() as conn:
        voters = (await conn.exec_driver_sql(f"SELECT voter_id FROM votes WHERE request_id = '{request.id}'")).all()
    assert [tuple(v) for v in voters] == [("U1",)]
