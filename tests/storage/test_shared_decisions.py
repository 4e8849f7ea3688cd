"""Decisions that arrive together share a unit (storage.group_commit.SharedUnits via Service.guarded) on
SQLite, one writer: fewer transactions than decisions. On PostgreSQL each is a lone unit, its one
statement and no BEGIN or COMMIT, side by side. On the real store of both engines every decision is
written exactly once, a race between two of them still ends with one winner, and a change that fails
fails only its own caller."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import event

from bot.domain.model import Action, Actor, Outcome, Risk, Via
from bot.approvals.service import ApprovalSpec, Service
from storage.base import Unit
from storage.sql import SqlStore


def spec(n: int) -> ApprovalSpec:
    return ApprovalSpec(action=Action("deploy", {"n": n}), summary=f"deploy {n}", risk=Risk.HIGH, channel="C1")


async def pending(service: Service, count: int) -> list[str]:
    return [(await service.submit(spec(n)))[0].id for n in range(count)]


def count_commits(store: SqlStore) -> list[int]:
    commits: list[int] = []
    event.listen(store.write_engine.sync_engine, "commit", lambda _conn: commits.append(1))
    return commits


async def test_decisions_arriving_together_share_units_and_each_is_written_once(store: SqlStore) -> None:
    service = Service(store)
    ids = await pending(service, 10)
    read = [await service.get(i) for i in ids]  # as a click's check read it: no read left to interleave
    commits = count_commits(store)
    results = await asyncio.gather(*(
        service.decide(r.id, Outcome.APPROVED, via=Via.BUTTON, actor=Actor("U1", "alice"), read=r) for r in read))
    assert all(r.won for r in results)
    if store.concurrent_writers:  # PostgreSQL: each decision its own one statement, nothing begun or committed
        assert commits == []
    else:
        assert 1 <= len(commits) < len(ids)  # one transaction each before group commit
    for request_id in ids:
        request = await store.get_request(request_id)
        assert request is not None and request.status.value == "approved" and request.version == 2
        assert [e.type for e in await store.audit_events(request_id)].count("decided") == 1
        assert len([i for i in await store.outbox_items(request_id) if i.dedupe_key.endswith(":decided")]) >= 1


async def test_two_decisions_of_one_request_in_a_shared_unit_end_with_one_winner(store: SqlStore) -> None:
    service = Service(store)
    ids = await pending(service, 4)
    target = ids[0]
    decisions = [service.decide(target, Outcome.APPROVED, via=Via.BUTTON, actor=Actor("U1", "alice")),
                 service.decide(target, Outcome.REJECTED, via=Via.BUTTON, actor=Actor("U2", "bob")),
                 *(service.decide(i, Outcome.APPROVED, via=Via.API) for i in ids[1:])]
    results = await asyncio.gather(*decisions)
    first, second = results[0], results[1]
    assert [first.won, second.won].count(True) == 1  # the loser re-read and found it decided
    winner = first if first.won else second
    loser = second if first.won else first
    assert loser.request.status == winner.request.status and loser.request.decision == winner.request.decision
    assert all(r.won for r in results[2:])
    stored = await store.get_request(target)
    assert stored is not None and stored.decision == winner.request.decision
    assert [e.type for e in await store.audit_events(target)].count("decided") == 1
    for request_id in ids[1:]:
        request = await store.get_request(request_id)
        assert request is not None and request.status.value == "approved"


async def test_a_failing_change_fails_only_its_caller(store: SqlStore) -> None:
    service = Service(store)
    ids = await pending(service, 5)
    bad = ids[2]

    async def refuse(_unit: Unit) -> None:
        raise RuntimeError("this decision's extra write failed")

    async def decide(request_id: str) -> Any:
        return await service.decide(request_id, Outcome.APPROVED, via=Via.API,
                                    also=refuse if request_id == bad else None)

    results = await asyncio.gather(*(decide(i) for i in ids), return_exceptions=True)
    assert isinstance(results[2], RuntimeError)
    assert all(not isinstance(r, BaseException) and r.won for i, r in enumerate(results) if i != 2)
    refused = await store.get_request(bad)
    assert refused is not None and refused.is_pending and refused.version == 1  # nothing of it was written
    assert [e.type for e in await store.audit_events(bad)] == ["created"]
    for request_id in ids:
        if request_id != bad:
            request = await store.get_request(request_id)
            assert request is not None and request.status.value == "approved"


@pytest.mark.parametrize("together", [1, 3])
async def test_a_lone_decision_and_a_small_group_commit_at_once(store: SqlStore, together: int) -> None:
    service = Service(store)
    ids = await pending(service, together)
    waiting = [asyncio.create_task(service.wait(i, 30)) for i in ids]
    for _ in range(1000):  # until each wait registered and read its request pending (turns of the loop, no time)
        if set(service.waiters.waited_ids()) == set(ids) and all(not t.done() for t in waiting):
            break
        await asyncio.sleep(0)
    assert set(service.waiters.waited_ids()) == set(ids)
    await asyncio.gather(*(service.decide(i, Outcome.APPROVED, via=Via.API) for i in ids))
    # Woken by the commit itself: each waiter has its decided request, no poll involved.
    woken = await asyncio.wait_for(asyncio.gather(*waiting), 10)
    assert [r.status.value for r in woken] == ["approved"] * together
