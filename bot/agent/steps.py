"""One step of an agent run: a model call, or the tool calls of the last assistant turn.

Every write happens in a `RunUnit` that first proves we still hold the run's lease (`fence`),
so a process whose lease ran out can never write over the one that took the run over.

Model step:   queued interventions -> user message; call the model; in ONE unit: append the
              assistant message, record each tool_use (allowed, or an approval/question request
              staged in the same transaction), save the run.
Tools step:   read the decisions; while any is pending the run waits (rows only, no task).
              Approved -> ready with the final params; rejected/expired -> an error result.
              Each ready call: ready->started (committed) -> run -> finished (committed).
              A call found `started` after a crash runs again only if its tool is idempotent;
              otherwise the model and the thread hear that its outcome is unknown.
              When every call has a result: one user message with all tool_results, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.outbox import effects
from bot.agent import blocks
from bot.agent.gates import (
    approved_params_problem,
    batch_members,
    batch_spec,
    run_duties,
)
from bot.agent.messages import (
    UNKNOWN_OUTCOME,
    decided_execution,
    import_sdk,
    intervention_text,
    model_error,
    normalise,
    output_text,
    run_tool,
    to_api_messages,
)
from bot.agent.access import RunAccess
from bot.agent.questions import check_questions, question_spec
from bot.agent.tools import ToolContext, Toolset
from bot.process.clock import Clock
from bot.outbox.egress import EgressPolicy
from bot.domain.model import (
    Action,
    Actor,
    AuditEvent,
    Kind,
    Outcome,
    Request,
    Risk,
    Via,
)
from bot.domain.runs import (
    ExecStatus,
    Gate,
    Phase,
    Run,
    RunMessage,
    RunStatus,
    ToolExecution,
)
from bot.domain.outcomes import RUNNER, RanStatus, RunOutcome, failed_after_decision, ran_after_decision, short_result
from bot.approvals.gate import Checked, PolicyGate, policy_gate
from bot.approvals.outcomes import record_run_outcome
from bot.approvals.service import ApprovalSpec, Service
from bot.slack.previews import clip, escape_mrkdwn, one_line, show_value
from storage.run_store import RunStore, RunUnit

if TYPE_CHECKING:  # importing the SDK takes ~2 s: `import_sdk` does it on first use, or in the background
    import anthropic

log = logging.getLogger(__name__)

HISTORY_CACHE_RUNS = 256


class StepResult(enum.Enum):
    CONTINUE = "continue"  # more work now
    SUSPEND = "suspend"  # waiting for a person (or for the root message): release the run
    DONE = "done"  # the run ended


class LeaseLost(Exception):
    """Another process took the run over (our lease expired): stop without writing."""


@dataclass(frozen=True)
class Agent:
    name: str
    system: str
    tools: Toolset


@dataclass(frozen=True)
class StepConfig:
    model: str
    max_tokens: int
    lease_seconds: float
    max_steps: int
    workspace: Path
    email_outbox: Path
    http_timeout: float = 30.0
    api_key_set: bool = True
    egress: EgressPolicy = field(default_factory=EgressPolicy)
    access: RunAccess = field(default_factory=RunAccess)


class Steps:
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

    # -- plumbing -------------------------------------------------------------------

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

    # -- the step -------------------------------------------------------------------

    async def step(self, run_id: str, owner: str) -> StepResult:
        run = await self.runs.get_run(run_id)
        if run is None or run.status.is_final:
            return StepResult.DONE
        if run.cancel_requested:
            await self.cancel(run, owner)
            return StepResult.DONE
        if run.root_ts is None:
            return StepResult.SUSPEND  # everything happens in the thread: wait for the root message
        agent = self.agents.get(run.agent)
        if agent is None:
            await self.fail(run, owner, f"there is no agent named {run.agent!r} in this Signoff")
            return StepResult.DONE
        if run.phase is Phase.TOOLS:
            return await self._tools(run, agent, owner)
        return await self._model(run, agent, owner)

    # -- model ----------------------------------------------------------------------

    async def sdk(self) -> Any:
        """The Anthropic SDK, imported on the first model call of the process, off the event loop.

        The import takes about 1 s of CPU. Done at start-up it slowed every process start and the
        requests of its first seconds, also in processes that never run an agent; done on the loop
        it would stop every ack for as long. One import, shared by concurrent first calls."""
        if self._sdk is None:
            self._sdk = asyncio.ensure_future(asyncio.to_thread(import_sdk))
        return await asyncio.shield(self._sdk)

    async def _model(self, run: Run, agent: Agent, owner: str) -> StepResult:
        if run.step_count >= (run.step_limit or self.config.max_steps):
            await self.fail(run, owner, f"stopped after {run.step_count} steps (the step limit, "
                                        "SIGNOFF_RUN_MAX_STEPS; Retry gives it as many more)")
            return StepResult.DONE
        if not self.config.api_key_set:
            await self.fail(run, owner, "ANTHROPIC_API_KEY is not set on the Signoff server")
            return StepResult.DONE
        run = await self._take_interventions(run, owner)
        history = await self._load_history(run)
        anthropic = await self.sdk()
        try:
            response = await self.client().messages.create(
                model=self.config.model,
                max_tokens=self.config.max_tokens,
                system=agent.system,
                tools=agent.tools.definitions(),  # type: ignore[arg-type]  # our dicts are the API's shape
                messages=to_api_messages(history),  # type: ignore[arg-type]
            )
        except anthropic.APIError as exc:
            await self.fail(run, owner, model_error(exc))
            return StepResult.DONE
        fresh = await self.runs.get_run(run.id)
        if fresh is not None and fresh.cancel_requested:  # a step boundary: the answer is not acted on
            await self.cancel(fresh, owner)
            return StepResult.DONE
        content = normalise(response.content)
        uses = [b for b in content if b["type"] == "tool_use"]
        reasoning = "\n\n".join(b["text"] for b in content if b["type"] == "text").strip()
        prepared = [self._prepare(run, agent, position, block, reasoning) for position, block in enumerate(uses)]
        checks = await self._policy(prepared)
        # The run ends here: count its calls that ran after a decision and failed (read before the unit).
        failed = [] if uses else failed_after_decision(await self.runs.executions(run.id))
        now = self.clock.now()
        seq = run.next_seq
        async with self._unit(run.id, owner) as unit:
            messages = [RunMessage(run.id, seq, "assistant", content, now)] if content else []
            await unit.append_messages(messages)
            run = run.evolve(step_count=run.step_count + 1, next_seq=seq + len(messages), updated_at=now)
            if uses:
                executions = []
                # Policy first: what it decided is recorded per call; the calls it leaves to a person
                # share one batch card when there are several.
                asking = [(e, checks[p].spec if p in checks else s) for p, (e, s) in enumerate(prepared)
                          if s is not None and (p not in checks or checks[p].pending)]
                batched = batch_members(asking)  # several gated calls of this turn: one card
                shared: Request | None = None
                for position, (execution, spec) in enumerate(prepared):
                    checked = checks.get(position)
                    if checked is not None and checked.request is None:  # the tier's default allows it
                        assert checked.evaluation is not None
                        execution = execution.evolve(gate=Gate.ALLOW, status=ExecStatus.READY,
                                                     final_input=execution.input, risk=checked.evaluation.tier.value)
                    elif checked is not None and checked.request is not None and not checked.pending:
                        await self._gate().stage(self.service, unit, checked)  # denied or allowed by policy
                        execution = execution.evolve(request_id=checked.request.id)
                    elif spec is not None and execution.tool_use_id in batched:
                        if shared is None:
                            members = [(e.tool_use_id, s) for e, s in asking if s is not None and e.tool_use_id in batched]
                            batch = batch_spec(members, run)
                            if checks:  # the tiers' approvers of its calls decide the batch
                                approvers = tuple(dict.fromkeys(a for _, s in members for a in s.approvers))
                                batch = replace(batch, approvers=approvers)
                            shared = self.service.new_request(batch)
                            await self.service.stage(unit, shared)
                        execution = execution.evolve(request_id=shared.id)
                    elif checked is not None and checked.request is not None:  # asks on its own card
                        await self._gate().stage(self.service, unit, checked)
                        execution = execution.evolve(request_id=checked.request.id)
                    elif spec is not None:
                        request = self.service.new_request(spec)
                        await self.service.stage(unit, request)
                        execution = execution.evolve(request_id=request.id)
                    executions.append(execution)
                    await self._announce(unit, run, execution, now)
                await unit.insert_executions(executions)
                run = run.evolve(phase=Phase.TOOLS, turn_seq=seq, status=RunStatus.RUNNING)
                run = await self._save(unit, run, "step", tool_calls=[e.name for e in executions])
            else:
                run = run.evolve(status=RunStatus.COMPLETED, result=reasoning, failed_steps=len(failed))
                await unit.enqueue(effects.note(run.id, "final", blocks.final_message(run, reasoning), now))
                run = await self._save(unit, run, "run_completed", steps=run.step_count, failed_steps=len(failed))
        self._remember(run.id, messages)
        return StepResult.CONTINUE if uses else StepResult.DONE

    def _gate(self) -> PolicyGate:
        gate = policy_gate(self.service)
        assert gate is not None, "a policy verdict exists only under a policy gate"
        return gate

    async def _policy(self, prepared: list[tuple[ToolExecution, ApprovalSpec | None]]) -> dict[int, Checked]:
        """Policy's verdict on each gated call (bot.approvals.gate): only when a policy file is loaded."""
        gate = policy_gate(self.service)
        if gate is None:
            return {}
        return {position: await gate.check(self.service, spec, record_defaults=False)
                for position, (_, spec) in enumerate(prepared)
                if spec is not None and spec.kind is Kind.APPROVAL}

    def _prepare(
        self, run: Run, agent: Agent, position: int, block: dict[str, Any], reasoning: str
    ) -> tuple[ToolExecution, ApprovalSpec | None]:
        """The execution row for one tool_use and, when a person must decide, the request to create."""
        name, params = block["name"], block["input"]
        tool = agent.tools.get(name)
        execution = ToolExecution(
            run_id=run.id, tool_use_id=block["id"], turn_seq=run.next_seq, position=position, name=name,
            input=params, gate=Gate.ALLOW, status=ExecStatus.READY, risk=(tool.risk.value if tool else "high"),
        )
        problem = None if tool is not None else f"there is no tool named {name!r}"
        if tool is not None:
            problem = tool.validate(params)
            if problem is None and tool.kind == "question":
                problem = check_questions(params["questions"])
        if problem is not None:
            return execution.evolve(gate=Gate.INVALID, status=ExecStatus.FINISHED, is_error=True,
                                    result=f"Not run: {problem}"), None
        assert tool is not None
        extra: dict[str, Any] = {"run_id": run.id, "tool_use_id": block["id"]}
        requested_by = f"{run.agent} agent"
        if tool.kind == "question":
            spec = question_spec(params["questions"], channel=run.channel, thread_ts=run.root_ts,
                                 context=reasoning or None, requested_by=requested_by, extra=extra)
            return execution.evolve(gate=Gate.QUESTION, status=ExecStatus.WAITING), spec
        if tool.risk in (Risk.HIGH, Risk.CRITICAL) or policy_gate(self.service) is not None:
            spec = ApprovalSpec(
                destructive=tool.destructive,  # the tool's declared risk and hint are inputs to policy
                trusted=True,  # the operator declared the tool's risk and SIGNOFF_RUN_APPROVERS
                action=Action(name, params, tool.input_schema),
                summary=tool.summarize(params),
                risk=tool.risk,
                channel=run.channel,
                context=reasoning or None,
                preview=tool.build_preview(self._ctx(run, block["id"]), params),
                requested_by=requested_by,
                extra=extra,
                approvers=self.config.access.card_approvers(),
                thread_ts=run.root_ts,
                **self.config.access.duties(run_duties(run, tool.risk, name)),
            )
            return execution.evolve(gate=Gate.ASK, status=ExecStatus.WAITING), spec
        return execution.evolve(final_input=params), None

    async def _announce(self, unit: RunUnit, run: Run, execution: ToolExecution, now: Any) -> None:
        """Audit an allowed call; a medium-risk one also gets an FYI in the thread."""
        if execution.gate is not Gate.ALLOW:
            return
        await unit.append_audit(AuditEvent(run.id, "tool_allowed", now, None, {
            "tool_use_id": execution.tool_use_id, "tool": execution.name, "risk": execution.risk}))
        if execution.risk == Risk.MEDIUM.value:
            params = ", ".join(f"{k}={clip(one_line(show_value(v)), 80)}" for k, v in execution.input.items())
            text = (f"FYI: `{escape_mrkdwn(execution.name)}` runs without asking (medium risk)")
            message = blocks.note_message("🟡", text, detail=params or None)
            await unit.enqueue(effects.note(run.id, f"fyi:{execution.tool_use_id}", message, now))

    async def _take_interventions(self, run: Run, owner: str) -> Run:
        if not await self.runs.has_interventions(run.id):
            return run
        now = self.clock.now()
        async with self._unit(run.id, owner) as unit:
            taken = await unit.take_interventions(run.id, run.next_seq)
            if not taken:
                return run
            content = [{"type": "text", "text": intervention_text(i.user_name, i.user_id, i.text)} for i in taken]
            messages = [RunMessage(run.id, run.next_seq, "user", content, now)]
            await unit.append_messages(messages)
            run = run.evolve(next_seq=run.next_seq + 1, updated_at=now)
            await unit.save_run(run)
            await unit.append_audit(AuditEvent(run.id, "interventions_delivered", now, None, {"count": len(taken)}))
        self._remember(run.id, messages)
        return run.evolve(version=run.version + 1)

    # -- tools ----------------------------------------------------------------------

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
