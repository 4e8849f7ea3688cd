"""APScheduler wiring: one interval job per process, calling one sweep function.

APScheduler 3 cannot share a job store between processes, so it is only a ticker here: every
process runs the same job on its own in-memory store, and the database coordinates (the sweep
claims due rows with guarded updates; see bot/approvals/timers.py). The first run is at start, so a process
that starts after an outage catches up at once. A sweep never overlaps itself in one process
(`max_instances=1`); ticks missed while it runs are coalesced into one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

log = logging.getLogger(__name__)

JOB_ID = "signoff-timers-sweep"


class SweepJob:
    def __init__(self, sweep: Callable[[], Awaitable[Any]], every_seconds: float,
                 done: Callable[[], None] = lambda: None) -> None:
        self.done = done  # called after every sweep (a metric: tests wait for N sweeps, never sleep)
        self.sweep = sweep
        self.every_seconds = every_seconds
        self.scheduler: AsyncIOScheduler | None = None
        self._running: asyncio.Task[Any] | None = None
        self._stopping = False

    async def start(self) -> None:
        # "skipped: maximum number of running instances reached" is the design (no overlap), not news.
        logging.getLogger("apscheduler").setLevel(logging.ERROR)
        self.scheduler = AsyncIOScheduler(timezone=UTC)
        self.scheduler.add_job(
            self._run,
            IntervalTrigger(seconds=self.every_seconds, timezone=UTC),
            id=JOB_ID,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
            next_run_time=datetime.now(UTC),
        )
        self.scheduler.start()

    async def _run(self) -> None:
        self._running = asyncio.current_task()
        try:
            await self.sweep()
        except asyncio.CancelledError:
            if self._stopping:  # stop() cut the sweep short: the rows stay due; not an error for APScheduler
                return
            raise
        except Exception:  # the next tick tries again; the rows are still due
            log.exception("timer sweep failed")
        finally:
            self._running = None
            self.done()

    async def stop(self) -> None:
        self._stopping = True
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=False)
            await asyncio.sleep(0)  # AsyncIOScheduler shuts down on the loop's next turn
        running = self._running
        if running is not None and not running.done():
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
