"""The writes every step of a run makes, each in a unit that first proves the run's lease (`fence`).

A process whose lease ran out can never write over the one that took the run over: every unit starts
with the fence, and a lost fence raises `LeaseLost`. `RunWrites` is the base of the model step
(bot/agent/model_step.py) and the tools step (bot/agent/tool_step.py): saving the run (and its root
message's update), the endings (cancel, fail) and the run's message history, cached per run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from bot.agent import blocks
from bot.agent.step_values import Agent, LeaseLost, StepConfig
from bot.agent.tools import ToolContext
from bot.approvals.service import Service
from bot.domain.model import Actor, AuditEvent, Outcome, Via
from bot.domain.runs import Run, RunMessage, RunStatus
from bot.outbox import effects
from bot.process.clock import Clock
from storage.run_store import RunStore, RunUnit

if TYPE_CHECKING:  # importing the SDK takes ~2 s: `import_sdk` does it on first use, or in the background
    import anthropic

HISTORY_CACHE_RUNS = 256


class RunWrites:
    """What the steps share: their parts, the fenced unit, saving the run, the endings, the history."""

    def __init__(
        self,
        service: Service,
        runs: RunStore,
        agents: dict[str, Agent],
        config: StepConfig,
        *,
        clock: Clock,
        client: Callable[[], anthropic.AsyncAnthropic],
    ) -> None:
        self.service = service
        self.runs = runs
        self.agents = agents
        self.config = config
        self.clock = clock
        self.client = client
        self._sdk: asyncio.Future[Any] | None = None
        self._history: OrderedDict[str, list[RunMessage]] = OrderedDict()

    @contextlib.asynccontextmanager
    async def _unit(self, run_id: str, owner: str) -> AsyncIterator[RunUnit]:
        async with self.runs.unit() as unit:
            until = self.clock.now() + timedelta(seconds=self.config.lease_seconds)
            if not await unit.fence(run_id, owner, until):
                raise LeaseLost(run_id)
            yield unit

    def _ctx(self, run: Run, tool_use_id: str = "") -> ToolContext:
        return ToolContext(self.config.workspace, self.config.email_outbox, run.id, tool_use_id,
                           self.config.http_timeout, self.config.egress)

    async def _save(self, unit: RunUnit, run: Run, event: str | None = None, **data: Any) -> Run:
        await unit.save_run(run)
        await unit.enqueue(effects.update_root(run.id, run.updated_at))
        if event:
            await unit.append_audit(AuditEvent(run.id, event, run.updated_at, None, data))
        return run.evolve(version=run.version + 1)

    # -- endings --------------------------------------------------------------------

    async def cancel(self, run: Run, owner: str) -> None:
        by = run.cancelled_by
        actor = Actor(by) if by else None
        for request_id in await self.runs.open_requests(run.id):
            await self.service.decide(request_id, Outcome.CANCELLED, via=Via.BUTTON if actor else Via.API,
                                      actor=actor, comment="The agent run was cancelled.")
        now = self.clock.now()
        async with self._unit(run.id, owner) as unit:
            who = f" by <@{by}>" if by and blocks.is_user(by) else ""
            await unit.enqueue(effects.note(run.id, "cancelled", blocks.note_message("🚫", f"Run cancelled{who}."), now))
            await self._save(unit, run.evolve(status=RunStatus.CANCELLED, updated_at=now), "run_cancelled", by=by)

    async def fail(self, run: Run, owner: str, error: str) -> None:
        """The run stops as failed; its thread gets the error and the trace, and its message offers a
        person to take it over (bot.agent.takeover)."""
        message = blocks.failure_note(run, error, await self.runs.executions(run.id))
        now = self.clock.now()
        async with self._unit(run.id, owner) as unit:
            # One note per failure: a run taken over can fail again.
            key = "failed" if not run.retries else f"failed:{run.retries}"
            await unit.enqueue(effects.note(run.id, key, message, now))
            await self._save(unit, run.evolve(status=RunStatus.FAILED, error=error, updated_at=now),
                             "run_failed", error=error)

    # -- history ----------------------------------------------------------------------

    async def _load_history(self, run: Run) -> list[RunMessage]:
        """The whole message log. Rows are append-only, so only rows this process has not seen are read."""
        # Never trust rows past what the run says it has (a unit that rolled back after we cached).
        cached = [m for m in self._history.get(run.id) or [] if m.seq < run.next_seq]
        after = cached[-1].seq if cached else -1
        if after < run.next_seq - 1:
            cached = cached + await self.runs.messages(run.id, after_seq=after)
        self._history[run.id] = cached
        self._history.move_to_end(run.id)
        while len(self._history) > HISTORY_CACHE_RUNS:
            self._history.popitem(last=False)
        return cached

    def _remember(self, run_id: str, messages: list[RunMessage]) -> None:
        cached = self._history.get(run_id)
        if cached is None or not messages:
            return
        if cached and cached[-1].seq + 1 == messages[0].seq:
            cached.extend(messages)
        else:
            self._history.pop(run_id, None)  # out of step: read it again next time
