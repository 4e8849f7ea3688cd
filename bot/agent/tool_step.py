"""The tools step of an agent run: the tool calls of the last assistant turn.

Read the decisions; while any is pending the run waits (rows only, no task). Approved -> ready with the
final params; rejected/expired -> an error result. Each ready call: ready->started (committed) -> run ->
finished (committed). A call found `started` after a crash runs again only if its tool is idempotent;
otherwise the model and the thread hear that its outcome is unknown. When every call has a result:
one user message with all tool_results, in order.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from bot.agent import blocks
from bot.agent.gates import approved_params_problem
from bot.agent.messages import UNKNOWN_OUTCOME, decided_execution, output_text, run_tool
from bot.agent.run_writes import RunWrites
from bot.agent.step_values import Agent, LeaseLost, StepResult
from bot.approvals.outcomes import record_run_outcome
from bot.domain.model import AuditEvent
from bot.domain.outcomes import RUNNER, RanStatus, RunOutcome, ran_after_decision, short_result
from bot.domain.runs import ExecStatus, Gate, Phase, Run, RunMessage, RunStatus, ToolExecution
from bot.outbox import effects
from bot.slack.previews import escape_mrkdwn
from storage.run_store import RunUnit

log = logging.getLogger(__name__)


class ToolStep(RunWrites):
    """The tools step (a part of bot/agent/steps.py's `Steps`)."""

    async def _tools(self, run: Run, agent: Agent, owner: str) -> StepResult:
        executions = await self.runs.executions(run.id, turn_seq=run.turn_seq)
        waiting, decided = False, {}
        for execution in executions:
            if execution.status is not ExecStatus.WAITING:
                continue
            request = await self.service.reads.request(execution.request_id or "")
            if request is not None and request.is_pending:
                waiting = True
            else:
                decided[execution.tool_use_id] = decided_execution(execution, request)
        status = RunStatus.WAITING if waiting else RunStatus.RUNNING
        executions = [decided.get(e.tool_use_id, e) for e in executions]
        # The first call to run is marked started in the same unit as the decisions (one commit fewer
        # between a click and the tool); `started` still commits before the tool runs.
        first = None if waiting else next((e for e in executions if e.status is not ExecStatus.FINISHED), None)
        begun = self._started(first) if first is not None and first.status is ExecStatus.READY else None
        if decided or status is not run.status or begun is not None:
            now = self.clock.now()
            async with self._unit(run.id, owner) as unit:
                for execution in decided.values():
                    if await unit.update_execution(execution, expected=ExecStatus.WAITING):
                        await unit.append_audit(AuditEvent(run.id, "tool_decided", now, None, {
                            "tool_use_id": execution.tool_use_id, "status": execution.status.value}))
                if begun is not None:
                    await self._start(unit, run, begun)
                if status is not run.status:
                    run = await self._save(unit, run.evolve(status=status, updated_at=now))
        if waiting:
            return StepResult.SUSPEND
        for i, execution in enumerate(executions):
            if execution.status is ExecStatus.FINISHED:
                continue
            if begun is not None and execution.tool_use_id == begun.tool_use_id:
                executions[i] = await self._run(run, agent, begun)
            else:
                fresh = await self.runs.get_run(run.id)
                if fresh is not None and fresh.cancel_requested:
                    await self.cancel(fresh, owner)
                    return StepResult.DONE
                executions[i] = await self._execute(run, agent, execution, owner)
            last = all(e.status is ExecStatus.FINISHED for e in executions)
            async with self._unit(run.id, owner) as unit:
                await self._finish(unit, run, executions[i])
                if last:  # the last result and the tool_result message commit together
                    delivered = await self._deliver(unit, run, executions)
            if last:
                self._remember(run.id, delivered)
                return StepResult.CONTINUE
        async with self._unit(run.id, owner) as unit:  # every call was decided without running
            delivered = await self._deliver(unit, run, executions)
        self._remember(run.id, delivered)
        return StepResult.CONTINUE

    async def _execute(self, run: Run, agent: Agent, execution: ToolExecution, owner: str) -> ToolExecution:
        """Run one call (`started` is committed first); return it finished, not yet written.

        A call found `started` was interrupted by a crash: it runs again only if its tool is idempotent.
        """
        tool = agent.tools.get(execution.name)
        now = self.clock.now()
        if execution.status is ExecStatus.STARTED and (tool is None or not tool.idempotent):
            return execution.evolve(status=ExecStatus.FINISHED, is_error=True, result=UNKNOWN_OUTCOME,
                                    finished_at=now)
        started = self._started(execution)
        async with self._unit(run.id, owner) as unit:
            await self._start(unit, run, started, expected=execution.status)
        return await self._run(run, agent, started)

    def _started(self, execution: ToolExecution) -> ToolExecution:
        return execution.evolve(status=ExecStatus.STARTED, attempts=execution.attempts + 1,
                                started_at=self.clock.now())

    async def _start(self, unit: RunUnit, run: Run, started: ToolExecution,
                     expected: ExecStatus = ExecStatus.READY) -> None:
        if not await unit.update_execution(started, expected=expected):
            raise LeaseLost(run.id)  # only a lease holder moves an execution, and that is not us now
        await unit.append_audit(AuditEvent(run.id, "tool_started", started.started_at or self.clock.now(), None, {
            "tool_use_id": started.tool_use_id, "tool": started.name, "attempt": started.attempts}))

    async def _run(self, run: Run, agent: Agent, started: ToolExecution) -> ToolExecution:
        """Run a call whose `started` is committed; return it finished (not yet written)."""
        tool = agent.tools.get(started.name)
        assert tool is not None  # an unknown tool never gets past _prepare
        params = started.final_input if started.final_input is not None else started.input
        if started.gate is Gate.ASK:  # bound to what runs: only the approved parameters, by their hash
            request = await self.service.reads.request(started.request_id or "")
            problem = approved_params_problem(request, started.tool_use_id, params)
            if problem is not None:
                log.warning("run %s: refused to run %s: %s", run.id, started.tool_use_id, problem)
                return started.evolve(status=ExecStatus.FINISHED, is_error=True, finished_at=self.clock.now(),
                                      result=f"Not run: the parameters are not the approved ones ({problem}).")
        text, is_error = await run_tool(tool, self._ctx(run, started.tool_use_id), params)
        result: Any = text
        if started.note:
            result = [{"type": "text", "text": started.note}, {"type": "text", "text": text}]
        return started.evolve(status=ExecStatus.FINISHED, result=result, is_error=is_error,
                              finished_at=self.clock.now())

    async def _finish(self, unit: RunUnit, run: Run, done: ToolExecution) -> None:
        """Store a call's result (it must still be `started`: that is what makes it exactly once)."""
        if not await unit.update_execution(done, expected=ExecStatus.STARTED):
            raise LeaseLost(run.id)
        at = done.finished_at or self.clock.now()
        if done.result == UNKNOWN_OUTCOME:
            text = (f"`{escape_mrkdwn(done.name)}` was running when Signoff restarted. It is not safe to repeat, "
                    "so it was not run again: its outcome is unknown. The agent was told.")
            await unit.enqueue(effects.note(run.id, f"unknown:{done.tool_use_id}", blocks.note_message("⚠️", text), at))
            await unit.append_audit(AuditEvent(run.id, "tool_outcome_unknown", at, None, {
                "tool_use_id": done.tool_use_id, "tool": done.name}))
        else:
            await unit.append_audit(AuditEvent(run.id, "tool_finished", at, None, {
                "tool_use_id": done.tool_use_id, "tool": done.name, "is_error": done.is_error,
                "attempt": done.attempts}))
        if ran_after_decision(done):  # the card said approved: it says what then ran (an execution receipt)
            assert done.request_id is not None
            used = done.final_input if done.final_input is not None else done.input
            if done.result == UNKNOWN_OUTCOME:
                outcome = RunOutcome(RanStatus.UNKNOWN, "Signoff restarted while it ran; it was not run again", at)
            elif done.is_error:
                outcome = replace(RunOutcome.failed(output_text(done.result), at), params=used, by=RUNNER)
            else:
                outcome = RunOutcome(RanStatus.RAN, "", at, used, short_result(output_text(done.result)), by=RUNNER)
            await record_run_outcome(unit, done.request_id, done.tool_use_id, outcome)

    async def _deliver(self, unit: RunUnit, run: Run, executions: list[ToolExecution]) -> list[RunMessage]:
        """One user message with a tool_result for every tool_use of the turn, in the turn's order."""
        now = self.clock.now()
        content = [e.tool_result() for e in sorted(executions, key=lambda e: e.position)]
        messages = [RunMessage(run.id, run.next_seq, "user", content, now)]
        await unit.append_messages(messages)
        run = run.evolve(phase=Phase.MODEL, turn_seq=None, next_seq=run.next_seq + 1, status=RunStatus.RUNNING,
                         updated_at=now)
        await unit.save_run(run)  # status and step count are unchanged: the root message stays as it is
        await unit.append_audit(AuditEvent(run.id, "tool_results", now, None, {"count": len(content)}))
        return messages

    # -- endings --------------------------------------------------------------------
