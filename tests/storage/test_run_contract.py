"""The run store's contract, runs and their lease: what every RunStore / RunUnit must do, on every backend.

A run is written only by whoever holds its lease; these tests pin the guarded writes that make
that true (claim, fence, release), the once-only writes on a run (set_root, request_cancel,
fail_unstarted), saving the loop's state, and which runs recovery picks up. Races are run for
real, between two store handles on one database: on PostgreSQL the writers interleave, on SQLite
the writer lock orders them. test_run_contract_records.py covers what hangs off a run.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from bot.domain.model import Status
from bot.domain.runs import ExecStatus, Gate, Intervention, Phase, RunStatus
from tests.storage.conftest import RunStoreFactory
from tests.storage.run_values import (
    LEASE,
    T0,
    RunStore,
    execution,
    get,
    insert,
    insert_requests,
    make_request,
    make_run,
    message,
)

# -- runs: insert, read, save --------------------------------------------------------------------------------


async def test_run_round_trip_keeps_every_field(run_store: RunStore) -> None:
    run = make_run(
        "run_full_0001", status=RunStatus.WAITING, phase=Phase.TOOLS,
        task="Écris à Zoë — 「確認」 🚀\nline two",
        channel="C0123ABCD", agent="agent-ünïcode", requested_by="U1", root_ts="1700000000.000100",
        step_count=3, next_seq=7, turn_seq=5, cancel_requested=True, cancelled_by="U2", result="done ✓",
        error="an earlier error", created_at=T0, updated_at=T0 + timedelta(minutes=2, microseconds=1),
    )
    await insert(run_store, run)
    assert await run_store.get_run(run.id) == run
    async with run_store.unit() as unit:
        assert await unit.get_run(run.id) == run
        assert await unit.get_run("run_missing") is None
    assert await run_store.get_run("run_missing") is None


async def test_a_new_run_holds_no_lease_and_minimal_run_round_trips(run_store: RunStore) -> None:
    run = make_run()
    await insert(run_store, run)
    read = await get(run_store, run.id)
    assert read == run
    assert (read.lease_owner, read.lease_until, read.root_ts, read.turn_seq) == (None, None, None, None)
    assert read.version == 1


async def test_run_datetimes_come_back_utc_aware(run_store: RunStore) -> None:
    india = timezone(timedelta(hours=5, minutes=30))
    local = datetime(2026, 7, 4, 23, 59, 58, 999999, tzinfo=india)
    run = make_run(created_at=local, updated_at=local)
    await insert(run_store, run)
    assert await run_store.claim(run.id, "w1", local, local + LEASE)
    read = await get(run_store, run.id)
    for value in (read.created_at, read.updated_at, read.lease_until):
        assert value is not None and value.utcoffset() == timedelta(0), value
    assert read.created_at == local and read.lease_until == local + LEASE
    expiry = await run_store.next_lease_expiry(after=T0)
    assert expiry == local + LEASE and expiry is not None and expiry.utcoffset() == timedelta(0)


async def test_save_run_writes_the_loop_columns_only_and_bumps_the_version(run_store: RunStore) -> None:
    run = make_run(requested_by="U1")
    await insert(run_store, run)
    async with run_store.unit() as unit:
        assert await unit.set_root(run.id, "1.0")
        assert await unit.request_cancel(run.id, "U2")
    stored = await get(run_store, run.id)
    assert stored.version == 3
    # The loop saves from its own (stale) copy: what others wrote meanwhile must survive.
    saved = run.evolve(status=RunStatus.WAITING, phase=Phase.TOOLS, step_count=2, next_seq=4, turn_seq=3,
                       result="partial", error="retrying", updated_at=T0 + timedelta(seconds=9),
                       task="changed task", channel="C9", agent="other", requested_by="U9", root_ts=None,
                       cancel_requested=False, cancelled_by=None, version=1)
    async with run_store.unit() as unit:
        await unit.save_run(saved)
        assert await unit.get_run(run.id) == stored.evolve(
            status=RunStatus.WAITING, phase=Phase.TOOLS, step_count=2, next_seq=4, turn_seq=3, result="partial",
            error="retrying", updated_at=T0 + timedelta(seconds=9), version=4)
    read = await get(run_store, run.id)
    assert (read.task, read.channel, read.agent, read.requested_by) == (run.task, "C1", "default", "U1")
    assert (read.root_ts, read.cancel_requested, read.cancelled_by, read.version) == ("1.0", True, "U2", 4)
    # turn_seq and result can be cleared again.
    async with run_store.unit() as unit:
        await unit.save_run(read.evolve(status=RunStatus.COMPLETED, phase=Phase.MODEL, turn_seq=None, result=None))
    final = await get(run_store, run.id)
    assert (final.status, final.phase, final.turn_seq, final.result, final.version) == (
        RunStatus.COMPLETED, Phase.MODEL, None, None, 5)


async def test_a_run_unit_that_raises_rolls_back_runs_and_requests_together(run_store: RunStore) -> None:
    existing = make_run(root_ts="1.0")
    await insert(run_store, existing)
    run, request = make_run(), make_request()
    with pytest.raises(RuntimeError, match="boom"):
        async with run_store.unit() as unit:
            await unit.insert_run(run)
            await unit.insert_request(request)
            await unit.insert_executions([execution(run, "toolu_1", request_id=request.id)])
            await unit.append_messages([message(run, 0)])
            await unit.add_intervention(Intervention(run.id, "stop", "U1", T0))
            assert await unit.first_time("Ev1", T0)
            assert await unit.request_cancel(existing.id, "U1")
            await unit.save_run(existing.evolve(status=RunStatus.FAILED))
            raise RuntimeError("boom")
    assert await run_store.get_run(run.id) is None
    assert await run_store.get_run(existing.id) == existing
    assert await run_store.executions(run.id) == [] and await run_store.messages(run.id) == []
    assert await run_store.interventions(run.id) == []
    async with run_store.unit() as unit:
        assert await unit.get_request(request.id) is None
        assert await unit.first_time("Ev1", T0)  # the event id was not kept either


async def test_ended_lists_only_runs_that_ended(run_store: RunStore) -> None:
    runs = {status: make_run(status=status) for status in RunStatus}
    await insert(run_store, *runs.values())
    ids = [r.id for r in runs.values()]
    ended = await run_store.ended(ids + ["run_unknown"])
    assert sorted(ended) == sorted(runs[s].id for s in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED))
    assert await run_store.ended([]) == []
    assert await run_store.ended([runs[RunStatus.RUNNING].id, runs[RunStatus.WAITING].id]) == []


# -- the lease ---------------------------------------------------------------------------------------------


async def test_claim_fence_release(run_store: RunStore) -> None:
    run = make_run()
    await insert(run_store, run)
    assert await run_store.claim(run.id, "w1", T0, T0 + LEASE)
    read = await get(run_store, run.id)
    assert (read.lease_owner, read.lease_until) == ("w1", T0 + LEASE)
    # Held: nobody else claims it, not even its holder a second time, while the lease runs.
    assert not await run_store.claim(run.id, "w2", T0 + LEASE - timedelta(microseconds=1), T0 + 2 * LEASE)
    assert not await run_store.claim(run.id, "w1", T0, T0 + 2 * LEASE)
    assert not await run_store.claim(run.id, "w2", T0 + LEASE, T0 + 2 * LEASE)  # still held at its last instant
    # Fence: only the holder passes, and passing extends the lease.
    async with run_store.unit() as unit:
        assert not await unit.fence(run.id, "w2", T0 + 5 * LEASE)
        assert await unit.fence(run.id, "w1", T0 + 3 * LEASE)
    assert (await get(run_store, run.id)).lease_until == T0 + 3 * LEASE
    assert (await get(run_store, run.id)).version == run.version  # the lease is not a change of the run
    # Release by someone else does nothing; by the holder frees the run at once.
    await run_store.release(run.id, "w2")
    assert (await get(run_store, run.id)).lease_owner == "w1"
    await run_store.release(run.id, "w1")
    read = await get(run_store, run.id)
    assert (read.lease_owner, read.lease_until) == (None, None)
    async with run_store.unit() as unit:
        assert not await unit.fence(run.id, "w1", T0 + LEASE)
    assert await run_store.claim(run.id, "w2", T0 + timedelta(seconds=1), T0 + LEASE)
    async with run_store.unit() as unit:
        assert not await unit.fence("run_unknown", "w2", T0 + LEASE)
    assert not await run_store.claim("run_unknown", "w2", T0, T0 + LEASE)
    await run_store.release("run_unknown", "w2")


async def test_an_expired_lease_is_claimable_and_fences_out_its_old_holder(run_store: RunStore) -> None:
    run = make_run()
    await insert(run_store, run)
    assert await run_store.claim(run.id, "dead", T0, T0 + LEASE)
    # Expired but nobody took it over: its holder still holds it (fence checks the owner, not the clock).
    async with run_store.unit() as unit:
        assert await unit.fence(run.id, "dead", T0 + LEASE)
    later = T0 + LEASE + timedelta(microseconds=1)
    assert await run_store.claim(run.id, "w2", later, later + LEASE)
    async with run_store.unit() as unit:
        assert not await unit.fence(run.id, "dead", later + 2 * LEASE)
    await run_store.release(run.id, "dead")  # a late release of the old holder frees nothing
    read = await get(run_store, run.id)
    assert (read.lease_owner, read.lease_until) == ("w2", later + LEASE)


async def test_an_ended_run_cannot_be_claimed(run_store: RunStore) -> None:
    finals = [make_run(status=s) for s in RunStatus if s.is_final]
    waiting = make_run(status=RunStatus.WAITING)
    await insert(run_store, *finals, waiting)
    for run in finals:
        assert not await run_store.claim(run.id, "w1", T0, T0 + LEASE), run.status
    assert await run_store.claim(waiting.id, "w1", T0, T0 + LEASE)


async def test_owners_racing_for_a_lease_exactly_one_wins(run_store_factory: RunStoreFactory) -> None:
    stores = [await run_store_factory(), await run_store_factory()]  # two processes on one database
    for round_ in range(5):
        run = make_run()
        await insert(stores[0], run)
        owners = [f"w{n}" for n in range(6)]
        results = await asyncio.gather(*(stores[n % 2].claim(run.id, owner, T0, T0 + LEASE)
                                         for n, owner in enumerate(owners)))
        assert results.count(True) == 1, round_
        assert (await get(stores[1], run.id)).lease_owner == owners[results.index(True)]


async def test_racing_for_an_expired_lease_exactly_one_wins(run_store_factory: RunStoreFactory) -> None:
    stores = [await run_store_factory(), await run_store_factory()]
    run = make_run()
    await insert(stores[0], run)
    assert await stores[0].claim(run.id, "dead", T0, T0 + LEASE)
    later = T0 + 2 * LEASE
    results = await asyncio.gather(*(stores[n % 2].claim(run.id, f"w{n}", later, later + LEASE) for n in range(6)))
    assert results.count(True) == 1
    assert (await get(stores[0], run.id)).lease_owner == f"w{results.index(True)}"


async def test_next_lease_expiry(run_store: RunStore) -> None:
    assert await run_store.next_lease_expiry(after=T0) is None
    first, second, ended, unleased = make_run(), make_run(), make_run(), make_run()
    await insert(run_store, first, second, ended, unleased)
    assert await run_store.next_lease_expiry(after=T0) is None
    assert await run_store.claim(second.id, "w", T0, T0 + 2 * LEASE)
    assert await run_store.claim(first.id, "w", T0, T0 + LEASE)
    assert await run_store.claim(ended.id, "w", T0, T0 + timedelta(seconds=1))
    async with run_store.unit() as unit:
        await unit.save_run(ended.evolve(status=RunStatus.COMPLETED))  # an ended run's lease is not waited for
    assert await run_store.next_lease_expiry(after=T0) == T0 + LEASE
    await run_store.release(first.id, "w")
    assert await run_store.next_lease_expiry(after=T0) == T0 + 2 * LEASE
    # A lease that has already lapsed is not waited for again (a run that waits on a person, left
    # leased by a process that died, must not make the recovery sweep spin).
    assert await run_store.next_lease_expiry(after=T0 + 2 * LEASE) is None
    await run_store.release(second.id, "w")
    assert await run_store.next_lease_expiry(after=T0) is None


# -- once-only writes on the run ---------------------------------------------------------------------------


async def test_set_root_once(run_store: RunStore) -> None:
    run = make_run()
    await insert(run_store, run)
    async with run_store.unit() as unit:
        assert await unit.set_root(run.id, "1.5")
    async with run_store.unit() as unit:
        assert not await unit.set_root(run.id, "2.5")
        assert not await unit.set_root("run_unknown", "2.5")
    read = await get(run_store, run.id)
    assert (read.root_ts, read.version) == ("1.5", 2)
    assert await run_store.find_run_by_root("C1", "1.5") == read


async def test_racing_set_root_exactly_one_wins(run_store: RunStore) -> None:
    run = make_run()
    await insert(run_store, run)

    async def set_root(n: int) -> bool:
        async with run_store.unit() as unit:
            return await unit.set_root(run.id, f"{n}.0")

    results = await asyncio.gather(*(set_root(n) for n in range(6)))
    assert results.count(True) == 1
    assert (await get(run_store, run.id)).root_ts == f"{results.index(True)}.0"


async def test_request_cancel(run_store: RunStore) -> None:
    running, waiting = make_run(), make_run(status=RunStatus.WAITING)
    finals = [make_run(status=s) for s in RunStatus if s.is_final]
    await insert(run_store, running, waiting, *finals)
    async with run_store.unit() as unit:
        assert await unit.request_cancel(running.id, "U1")
        assert await unit.request_cancel(waiting.id, None)
        for run in finals:
            assert not await unit.request_cancel(run.id, "U1"), run.status
        assert not await unit.request_cancel("run_unknown", "U1")
    async with run_store.unit() as unit:
        assert not await unit.request_cancel(running.id, "U2")  # asked once: the first asker is kept
    read = await get(run_store, running.id)
    assert (read.cancel_requested, read.cancelled_by, read.version, read.status) == (True, "U1", 2,
                                                                                     RunStatus.RUNNING)
    read = await get(run_store, waiting.id)
    assert (read.cancel_requested, read.cancelled_by) == (True, None)
    for run in finals:
        assert await run_store.get_run(run.id) == run


async def test_fail_unstarted(run_store: RunStore) -> None:
    unstarted, started, leased, ended = make_run(), make_run(root_ts="1.0"), make_run(), make_run(
        status=RunStatus.COMPLETED)
    await insert(run_store, unstarted, started, leased, ended)
    assert await run_store.claim(leased.id, "w1", T0, T0 + LEASE)
    now = T0 + timedelta(seconds=4)
    async with run_store.unit() as unit:
        assert await unit.fail_unstarted(unstarted.id, "could not post: channel_not_found", now)
        assert not await unit.fail_unstarted(started.id, "x", now)  # someone may be running it
        assert not await unit.fail_unstarted(leased.id, "x", now)
        assert not await unit.fail_unstarted(ended.id, "x", now)
        assert not await unit.fail_unstarted("run_unknown", "x", now)
    async with run_store.unit() as unit:
        assert not await unit.fail_unstarted(unstarted.id, "twice", now + LEASE)  # it has ended now
    assert await get(run_store, unstarted.id) == unstarted.evolve(
        status=RunStatus.FAILED, error="could not post: channel_not_found", updated_at=now, version=2)
    for run in (started, ended):
        assert await run_store.get_run(run.id) == run
    assert await run_store.ended([unstarted.id, started.id]) == [unstarted.id]


# -- recovery ----------------------------------------------------------------------------------------------


async def test_recoverable_lists_unleased_runs_with_work_oldest_first(run_store: RunStore) -> None:
    def at(minutes: int) -> datetime:
        return T0 + timedelta(minutes=minutes)

    running = make_run(root_ts="1.0", updated_at=at(3))
    unstarted = make_run(updated_at=at(0))  # no root message yet: the start path owns it
    cancel_asked = make_run(status=RunStatus.WAITING, cancel_requested=True, updated_at=at(1))
    all_decided = make_run(status=RunStatus.WAITING, root_ts="2.0", updated_at=at(2))
    still_waiting = make_run(status=RunStatus.WAITING, root_ts="3.0", updated_at=at(0))
    leased = make_run(root_ts="4.0", updated_at=at(0))
    expired = make_run(root_ts="5.0", updated_at=at(4))
    finals = [make_run(status=s, root_ts="6.0", cancel_requested=True, updated_at=at(0))
              for s in RunStatus if s.is_final]
    await insert(run_store, running, unstarted, cancel_asked, all_decided, still_waiting, leased, expired, *finals)
    decided, pending = make_request(status=Status.APPROVED), make_request()
    await insert_requests(run_store, decided, pending)
    async with run_store.unit() as unit:
        await unit.insert_executions([
            execution(all_decided, "t1", gate=Gate.ASK, status=ExecStatus.WAITING, request_id=decided.id),
            execution(still_waiting, "t2", gate=Gate.ASK, status=ExecStatus.WAITING, request_id=pending.id),
            execution(still_waiting, "t3", position=1, gate=Gate.ASK, status=ExecStatus.WAITING,
                      request_id=decided.id),
        ])
    now = at(10)
    assert await run_store.claim(leased.id, "w1", now, now + LEASE)
    assert await run_store.claim(expired.id, "dead", T0, T0 + LEASE)
    assert await run_store.recoverable(now, limit=10) == [cancel_asked.id, all_decided.id, running.id, expired.id]
    assert await run_store.recoverable(now, limit=2) == [cancel_asked.id, all_decided.id]
    # The last pending request decided: the waiting run has work again.
    async with run_store.unit() as unit:
        assert await unit.update_request(pending.evolve(status=Status.APPROVED), expected_version=1)
    assert still_waiting.id in await run_store.recoverable(now, limit=10)
    # Leased runs are someone's until their lease runs out.
    assert leased.id not in await run_store.recoverable(now + LEASE, limit=10)
    assert leased.id in await run_store.recoverable(now + LEASE + timedelta(microseconds=1), limit=10)
    await run_store.release(leased.id, "w1")
    assert leased.id in await run_store.recoverable(now, limit=10)


# -- a failed run taken over (Retry, Correct and retry, Cancel) ----------------------------------------------


async def test_reopen_takes_a_failed_run_over_once_per_failure(run_store: RunStore) -> None:
    failed = make_run("run_failed_0001", status=RunStatus.FAILED, root_ts="1700000000.000100", step_count=7,
                      error="the model API answered 400")
    unposted = make_run("run_failed_0002", status=RunStatus.FAILED, error="could not post the run's message")
    running = make_run("run_running_0001", root_ts="1700000000.000200")
    for run in (failed, unposted, running):
        await insert(run_store, run)
    later = T0 + timedelta(minutes=1)
    async with run_store.unit() as unit:
        assert not await unit.reopen(failed.id, retries=1, step_limit=57, now=later)  # not the failure shown
        assert not await unit.reopen(unposted.id, retries=0, step_limit=50, now=later)  # no thread to go on in
        assert not await unit.reopen(running.id, retries=0, step_limit=50, now=later)  # not failed
        assert await unit.reopen(failed.id, retries=0, step_limit=57, now=later)
        assert not await unit.reopen(failed.id, retries=0, step_limit=57, now=later)  # the second click
    reopened = await get(run_store, failed.id)
    assert (reopened.status, reopened.error, reopened.retries, reopened.step_limit, reopened.step_count) == (
        RunStatus.RUNNING, None, 1, 57, 7)
    assert reopened.version == failed.version + 1 and reopened.updated_at == later


async def test_close_failed_gives_up_only_a_failed_run(run_store: RunStore) -> None:
    failed = make_run("run_failed_0003", status=RunStatus.FAILED, root_ts="1700000000.000300", error="boom")
    running = make_run("run_running_0002", root_ts="1700000000.000400")
    for run in (failed, running):
        await insert(run_store, run)
    async with run_store.unit() as unit:
        assert not await unit.close_failed(running.id, "U1", T0)
        assert await unit.close_failed(failed.id, "U1", T0)
        assert not await unit.close_failed(failed.id, "U1", T0)
    closed = await get(run_store, failed.id)
    assert (closed.status, closed.cancelled_by) == (RunStatus.CANCELLED, "U1")
    assert (await get(run_store, running.id)).status is RunStatus.RUNNING
