"""Listener work of acked clicks, kept out of the way of the next clicks' acks.

Slack needs the ack of every click within 3 s; what the click then does (the decision, the card
update, the "already approved" note) has no such deadline. When many clicks arrive at once, e.g.
fifty people tapping Approve on a card posted to a busy channel, running each click's listener as
soon as it is acked makes the acks queue behind that work on the shared event loop. So a click's
listener goes into this backlog, which starts the oldest one: when no Slack request came in after it
and none is being answered (a lone click waits only for its own ack); else when none has arrived for
`quiet` seconds and none is being answered (the burst is over or pauses); or when it has waited
`max_defer` seconds (a burst that never stops still gets its work done, at most that much later). A request being answered
counts as not quiet: a burst's clicks wait for their inputs' commit before their acks, and fifty people
whose acks are all waiting on one commit send nothing meanwhile, which looked like a pause; work
started then made those acks wait behind it (on PostgreSQL, the slowest acks of a burst). Likewise
the clicks of one committed group are queued after the last arrival while the next group's clicks wait
on their commit: they are not lone clicks.

Clicks that open a modal are not deferred: their `trigger_id` expires 3 s after the click
(`web.py` runs those straight away).

The gate is a timer (how long since the last arrival), not a poll of anything: at most one
worker waits on it at a time, and it only waits while work is queued. Each item runs as a task
of its own, tracked until it ends; a worker waits for it for at most `slot_seconds`, so an item
stuck on Slack (a 429's Retry-After) delays the others by that much, not for as long as it takes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

log = logging.getLogger(__name__)

QUIET_SECONDS = 0.005
MAX_DEFER_SECONDS = 1.0
SLOT_SECONDS = 0.5
WORKERS = 4

Work = Callable[[], Awaitable[Any]]


class Backlog:
    def __init__(
        self,
        *,
        quiet: float = QUIET_SECONDS,
        max_defer: float = MAX_DEFER_SECONDS,
        slot_seconds: float = SLOT_SECONDS,
        workers: int = WORKERS,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.quiet = quiet
        self.max_defer = max_defer
        self.slot_seconds = slot_seconds
        self.workers = workers
        self.now = now
        self.last_arrival = -float("inf")
        self.last_answered = -float("inf")
        self.answering = 0  # Slack requests in `handling()`
        self._queue: deque[tuple[float, Work]] = deque()
        self._queued = asyncio.Event()
        self._gate = asyncio.Lock()
        self._draining = asyncio.Event()
        self._nudge = asyncio.Event()  # the gate looks again: stop(), or the last request being answered was
        self._running: set[asyncio.Task[None]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._workers: list[asyncio.Task[None]] = []
        self.gate_checks = 0  # how often the gate compared the clock (tests wait on it, not on time)

    def __len__(self) -> int:
        return len(self._queue) + len(self._running)

    @property
    def queued(self) -> int:
        """Acked clicks whose work has not started."""
        return len(self._queue)

    def arrived(self) -> None:
        """A Slack request came in: queued work waits until they stop for `quiet` seconds."""
        self.last_arrival = self.now()

    @contextlib.contextmanager
    def handling(self) -> Iterator[None]:
        """A Slack request from its arrival to its answer: queued work waits while any is being answered."""
        self.arrived()
        self.answering += 1
        try:
            yield
        finally:
            self.answering -= 1
            self.last_answered = self.now()
            if not self.answering:
                self._nudge.set()

    def lone(self) -> bool:
        """Inside `handling()`: nothing queued or running, and no request but the caller's being answered."""
        return not len(self) and self.answering <= 1

    def add(self, work: Work) -> None:
        if self._draining.is_set():  # after stop(): nobody would run it
            log.error("an acked click arrived after the click backlog stopped; it is not handled")
            return
        self._queue.append((self.now(), work))
        self._idle.clear()
        self._queued.set()

    def start_now(self, work: Work) -> None:
        """Run `work` at once, not queued behind the gate: for a lone click, when nothing is queued or
        running. Tracked like queued work, so `len`, `stop` and the next clicks (which then queue) see it."""
        if self._draining.is_set():
            log.error("an acked click arrived after the click backlog stopped; it is not handled")
            return
        task = asyncio.create_task(self._run(work))
        self._running.add(task)
        self._idle.clear()
        task.add_done_callback(self._ended)

    def start(self) -> None:
        self._workers = [asyncio.create_task(self._work(), name=f"click-backlog-{i}") for i in range(self.workers)]

    async def stop(self, timeout: float = 5.0) -> None:
        """Run what is queued without waiting for quiet, wait (up to `timeout`) for all of it to end, stop."""
        self._draining.set()
        self._queued.set()
        self._nudge.set()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            log.warning("stopping with %d acked clicks not yet handled", len(self))
        for task in [*self._workers, *self._running]:
            task.cancel()
        await asyncio.gather(*self._workers, *self._running, return_exceptions=True)
        self._workers = []

    async def _work(self) -> None:
        while True:
            if not self._queue:
                self._queued.clear()
                await self._queued.wait()
                continue
            async with self._gate:
                await self._until_due()
                if not self._queue:
                    continue
                _, work = self._queue.popleft()
                task = asyncio.create_task(self._run(work))
                self._running.add(task)
                task.add_done_callback(self._ended)
            # Wait for it, so that at most `workers` items run at a time, but not for ever.
            await asyncio.wait({task}, timeout=self.slot_seconds)

    @staticmethod
    async def _run(work: Work) -> None:
        try:
            await work()
        except Exception:  # one click's failure must not stop the others
            log.exception("handling an acked click failed")

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if task.cancelled() and not self._draining.is_set():
            log.warning("handling an acked click was cancelled")
        if not len(self):
            self._idle.set()

    async def _until_due(self) -> None:
        """Until nothing arrived after the oldest item, or requests paused for `quiet` s with none being
        answered, or it waited `max_defer` s."""
        while self._queue and not self._draining.is_set():
            self.gate_checks += 1
            enqueued = self._queue[0][0]
            if self.last_arrival <= enqueued and not self.answering:  # a lone click goes once it is answered
                return
            deadline = enqueued + self.max_defer
            if self.answering:  # not quiet: look again when the last is answered (or at the deadline)
                due = deadline
            else:
                due = min(max(self.last_arrival, self.last_answered) + self.quiet, deadline)
            wait = due - self.now()
            if wait <= 0:
                return
            self._nudge.clear()
            with contextlib.suppress(TimeoutError):  # a timer, cut short by stop() or the last answer
                await asyncio.wait_for(self._nudge.wait(), wait)
