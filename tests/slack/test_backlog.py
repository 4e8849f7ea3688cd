"""The click backlog's order of work, on a clock the test moves (no wall-clock assertions)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.slack.backlog import Backlog


class Now:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def recorder(done: list[str], name: str, event: asyncio.Event | None = None):  # type: ignore[no-untyped-def]
    async def work() -> None:
        done.append(name)
        if event is not None:
            event.set()

    return work


async def let_tasks_run() -> None:
    """Let every ready task run (the backlog's timers here are long: nothing fires by itself)."""
    for _ in range(20):
        await asyncio.sleep(0)


async def gate_checked(b: Backlog, times: int) -> None:
    """Until the gate has looked at the clock `times` more times (each wait is `quiet` real seconds)."""
    target = b.gate_checks + times
    async with asyncio.timeout(10):
        while b.gate_checks < target:
            await asyncio.sleep(0.001)


@pytest.fixture
async def started():  # type: ignore[no-untyped-def]
    """Makes started backlogs (with the test's clock unless one is given); stops them at the end."""
    made: list[Backlog] = []

    def make(**options: Any) -> tuple[Backlog, Now]:
        now = Now()
        b = Backlog(**{"now": now, **options})
        b.start()
        made.append(b)
        return b, now

    yield make
    for b in made:
        await b.stop(timeout=1)


async def test_a_lone_click_runs_at_once(started: Any) -> None:
    b, now = started(quiet=60, max_defer=600, workers=2)
    done: list[str] = []
    b.arrived()
    b.add(recorder(done, "a"))
    await let_tasks_run()
    assert done == ["a"]


async def test_a_committed_groups_click_waits_while_the_next_groups_acks_are_being_answered(started: Any) -> None:
    # Group commit answers a burst in groups: when the first group's commit returns, its clicks are queued
    # after the last arrival, while the clicks that came in meanwhile still wait on their own commit.
    b, now = started(quiet=60, max_defer=600, workers=2)
    done: list[str] = []
    ran = asyncio.Event()
    with b.handling():  # a click of the next group: arrived, its ack waiting on the commit
        now.t += 0.001
        b.add(recorder(done, "a", ran))  # the first group's click, queued after that arrival
        await gate_checked(b, 1)
        await let_tasks_run()
        assert done == [] and b.answering == 1
    # Answered: nothing arrived after "a", so it goes at once, with no `quiet` wait (60 s here).
    await asyncio.wait_for(ran.wait(), 5)
    assert done == ["a"]


async def test_work_waits_while_requests_keep_arriving_then_runs_in_order(started: Any) -> None:
    # The gate's timer is real (quiet: 0.01 s) but it compares against the test's clock, which only
    # moves when the test says: nothing can run before the test lets the burst end.
    b, now = started(quiet=0.01, max_defer=600, workers=2)
    done: list[str] = []
    ran = asyncio.Event()
    b.arrived()
    b.add(recorder(done, "a"))
    b.arrived()
    b.add(recorder(done, "b", ran))
    now.t += 1
    b.arrived()  # a burst: more requests after both
    await gate_checked(b, 10)  # ten of the gate's checks, all on a clock that has not moved
    assert done == [] and len(b) == 2
    now.t += 0.009  # 9 ms after the last arrival: not yet quiet for 10 ms
    await gate_checked(b, 5)
    assert done == []
    now.t += 0.002
    await asyncio.wait_for(ran.wait(), 5)
    assert done == ["a", "b"]


async def test_work_waits_while_a_request_is_being_answered(started: Any) -> None:
    # Fifty clicks whose acks all wait on one commit send nothing meanwhile: no arrival for `quiet`
    # seconds is not the end of the burst while their acks are still to be answered.
    b, now = started(quiet=0.01, max_defer=600, workers=1)
    done: list[str] = []
    ran = asyncio.Event()
    b.arrived()
    b.add(recorder(done, "a", ran))
    now.t += 0.001
    with b.handling():  # a click that came in after it, its ack waiting on the commit
        now.t += 1  # long after the last arrival
        await gate_checked(b, 1)
        await let_tasks_run()
        assert done == [] and b.answering == 1
    now.t += 0.011  # answered, and quiet since
    await asyncio.wait_for(ran.wait(), 5)  # the last answer wakes the gate: no wait for max_defer
    assert done == ["a"] and b.answering == 0


async def test_an_endless_burst_still_runs_work_after_max_defer(started: Any) -> None:
    b, now = started(quiet=0.01, max_defer=0.05, workers=1)
    done: list[str] = []
    ran = asyncio.Event()
    b.arrived()
    b.add(recorder(done, "a", ran))
    now.t += 0.001
    b.arrived()
    await let_tasks_run()
    assert done == []
    now.t += 0.049  # 0.05 s after it was queued; requests still arriving
    b.arrived()
    await asyncio.wait_for(ran.wait(), 5)  # the gate re-checks after at most `quiet` real seconds
    assert done == ["a"]


async def test_stop_runs_everything_still_queued_and_one_failure_does_not_stop_the_rest(started: Any) -> None:
    b, now = started(quiet=3600, max_defer=3600, workers=2)
    done: list[str] = []

    async def boom() -> None:
        raise RuntimeError("listener failed")

    b.arrived()
    b.add(recorder(done, "a"))
    b.add(boom)
    b.add(recorder(done, "c"))
    now.t += 1
    b.arrived()
    await let_tasks_run()
    assert done == []
    await b.stop(timeout=5)
    assert done == ["a", "c"] and len(b) == 0


async def test_a_cancelled_or_stuck_click_does_not_hold_up_the_rest(started: Any) -> None:
    # One worker: a click cancelled from inside (e.g. a shared lookup cancelled elsewhere) must not
    # end the worker, and one waiting on Slack for long only holds it for `slot_seconds`.
    b, _ = started(quiet=3600, max_defer=3600, slot_seconds=0.05, workers=1)
    done: list[str] = []
    ran = asyncio.Event()
    release = asyncio.Event()

    async def cancelled() -> None:
        raise asyncio.CancelledError

    async def stuck() -> None:
        await release.wait()
        done.append("stuck")

    b.add(cancelled)
    b.add(stuck)
    b.add(recorder(done, "after", ran))
    await asyncio.wait_for(ran.wait(), 5)
    assert done == ["after"] and len(b) == 1  # the stuck one still runs, tracked
    release.set()
    await b.stop(timeout=5)
    assert done == ["after", "stuck"] and len(b) == 0


async def test_work_started_at_once_is_tracked_like_queued_work(started: Any, caplog: pytest.LogCaptureFixture) -> None:
    """`start_now` (a lone click): runs without the gate, counts in `len` (the next clicks queue behind
    it), has its failure logged, and is waited for by `stop`."""
    b, now = started(quiet=3600, max_defer=3600, workers=1)
    release = asyncio.Event()
    done: list[str] = []

    async def slow() -> None:
        await release.wait()
        done.append("slow")

    async def boom() -> None:
        raise RuntimeError("listener failed")

    b.arrived()
    now.t += 1
    b.start_now(slow)  # an arrival came before, but it is not queued: no gate
    await let_tasks_run()
    assert len(b) == 1 and b.queued == 0
    b.start_now(boom)
    await let_tasks_run()
    assert "handling an acked click failed" in caplog.text and len(b) == 1
    release.set()
    await b.stop(timeout=5)
    assert done == ["slow"] and len(b) == 0
