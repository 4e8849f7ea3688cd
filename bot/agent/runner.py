"""Drives agent runs: who works on which run, when, and recovery after a crash.

A run is worked on by whoever holds its lease (`RunStore.claim`), renewed by a heartbeat
while a model call or a tool runs. Work starts when:
- the run is created and its root message is posted (the Slack delivery kicks it);
- a decision on one of its requests commits: every decision commits through `Service.decide` in
  some process, whose `on_decided` hook hands us the decided request there and then;
- the recovery sweep finds it: unleased or expired lease, and work to do (mid-step at a crash,
  all gated calls decided while nobody was listening, cancel asked).
A waiting run has no task here: it is rows in the database until a person acts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any

from sqlalchemy.exc import DBAPIError, IntegrityError

from bot.agent.messages import internal_error_text
from bot.agent.step_values import LeaseLost, StepResult
from bot.agent.steps import Steps
from bot.process.clock import Clock
from bot.domain.model import Request
from bot.approvals.service import Service
from storage.run_store import RunStore

log = logging.getLogger(__name__)

SWEEP_BATCH = 100
STOP_GRACE_SECONDS = 10.0  # on shutdown, let a running tool finish rather than leave its outcome unknown
EVENT_MEMORY = timedelta(days=1)  # Slack retries an event within minutes; its id is kept this long


class Runner:
    def __init__(
        self,
        steps: Steps,
        runs: RunStore,
        service: Service,
        *,
        clock: Clock,
        lease_seconds: float,
        sweep_seconds: float,
        concurrency: int = 32,
    ) -> None:
        self.steps = steps
        self.runs = runs
        self.service = service
        self.clock = clock
        self.lease_seconds = lease_seconds
        self.sweep_seconds = sweep_seconds
        self.owner = f"{socket.gethostname()[:30]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # Long-polls on runs (GET /api/v1/runs/{id}?wait=) share the requests' waiters, so the
        # cross-process watcher (bot/approvals/foreign_changes.py) wakes them too when another process ends the run.
        self.waiters = service.waiters
        self._again: dict[str, bool] = {}  # runs being driven here -> kicked again meanwhile
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(concurrency)
        self._sweeper: asyncio.Task[None] | None = None
        self._stopping = False

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        self.service.on_decided(self.on_decided)
        self._sweeper = asyncio.create_task(self._sweep_loop(), name="signoff-run-sweep")

    async def stop(self) -> None:
        self._stopping = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=STOP_GRACE_SECONDS)
        tasks = [t for t in (self._sweeper, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- wake-ups ---------------------------------------------------------------------

    def kick(self, run_id: str) -> None:
        """Work on the run now (if it is free); a kick during work makes it look again afterwards."""
        if self._stopping:
            return
        if run_id in self._again:
            self._again[run_id] = True
            return
        self._again[run_id] = False
        self._spawn(self._drive(run_id))

    def on_decided(self, request: Request) -> None:
        """A request was decided in this process: if it gates a run, work on the run."""
        run_id = request.extra.get("run_id")
        if isinstance(run_id, str):
            self.kick(run_id)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task: asyncio.Task[Any] = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- driving ----------------------------------------------------------------------

    async def _drive(self, run_id: str) -> None:
        try:
            while True:
                await self._drive_once(run_id)
                if not self._again.get(run_id):
                    break
                self._again[run_id] = False
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("driving run %s failed", run_id)
        finally:
            self._again.pop(run_id, None)
            self.waiters.wake(run_id)

    async def _drive_once(self, run_id: str) -> None:
        async with self._slots:
            now = self.clock.now()
            if not await self.runs.claim(run_id, self.owner, now, now + timedelta(seconds=self.lease_seconds)):
                return  # ended, or another worker has it (it will see what woke us)
            heartbeat = asyncio.create_task(self._heartbeat(run_id))
            try:
                while True:
                    result = await self.steps.step(run_id, self.owner)
                    self.waiters.wake(run_id)
                    if result is not StepResult.CONTINUE:
                        break
            except LeaseLost:
                log.warning("lost the lease of run %s; another process continues it", run_id)
            except IntegrityError as exc:  # e.g. a model that reuses a tool_use id: retrying cannot help
                log.exception("run %s broke a database constraint", run_id)
                await self._crashed(run_id, exc)
            except DBAPIError:
                log.exception("database error in run %s; the sweep will retry", run_id)
            except Exception as exc:
                log.exception("run %s crashed", run_id)
                await self._crashed(run_id, exc)
            finally:
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await heartbeat
                with contextlib.suppress(Exception):
                    await self.runs.release(run_id, self.owner)

    async def _crashed(self, run_id: str, exc: Exception) -> None:
        run = await self.runs.get_run(run_id)
        if run is not None and not run.status.is_final:
            with contextlib.suppress(LeaseLost):
                await self.steps.fail(run, self.owner, internal_error_text(exc, "Signoff stopped this run"))

    async def _heartbeat(self, run_id: str) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            async with self.runs.unit() as unit:
                until = self.clock.now() + timedelta(seconds=self.lease_seconds)
                if not await unit.fence(run_id, self.owner, until):
                    return

    # -- recovery ---------------------------------------------------------------------

    async def sweep(self) -> int:
        """Kick every run that has work and nobody working on it; returns how many."""
        ids = await self.runs.recoverable(self.clock.now(), limit=SWEEP_BATCH)
        for run_id in ids:
            self.kick(run_id)
        return len(ids)

    async def _sweep_loop(self) -> None:
        pruned_at = None
        while True:
            try:
                await self.sweep()
                now = self.clock.now()
                if pruned_at is None or now - pruned_at > timedelta(hours=1):
                    await self.runs.forget_events(before=now - EVENT_MEMORY)
                    pruned_at = now
                timeout = self.sweep_seconds
                expiry = await self.runs.next_lease_expiry(after=now)
                if expiry is not None:  # a lease that lapses (its holder died) is worth a look right then
                    timeout = min(timeout, max(0.05, (expiry - self.clock.now()).total_seconds() + 0.05))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("run recovery sweep failed")
                timeout = self.sweep_seconds
            await asyncio.sleep(timeout)  # recovery only: live runs are kicked, never found by this sweep
