"""The model step of an agent run: queued interventions -> user message; call the model; in ONE unit:
append the assistant message, record each tool_use (allowed, or an approval/question request staged
in the same transaction), save the run.

Policy decides first (bot/approvals/gate.py, when a policy file is loaded); the calls it leaves to a
person share one batch card when there are several in the turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from bot.agent import blocks
from bot.agent.gates import batch_members, batch_spec, run_duties
from bot.agent.messages import import_sdk, intervention_text, model_error, normalise, to_api_messages
from bot.agent.questions import check_questions, question_spec
from bot.agent.run_writes import RunWrites
from bot.agent.step_values import Agent, StepResult
from bot.approvals.gate import Checked, PolicyGate, policy_gate
from bot.approvals.types import ApprovalSpec
from bot.domain.model import Action, AuditEvent, Kind, Request, Risk
from bot.domain.outcomes import failed_after_decision
from bot.domain.runs import ExecStatus, Gate, Phase, Run, RunMessage, RunStatus, ToolExecution
from bot.outbox import effects
from bot.slack.previews import clip, escape_mrkdwn, one_line, show_value
from storage.run_store import RunUnit


class ModelStep(RunWrites):
    """The model step (a part of bot/agent/steps.py's `Steps`)."""

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
                shared: list[Request] = []

                async def batch_request() -> Request:  # the turn's one batch card, staged when first needed
                    if not shared:
                        members = [(e.tool_use_id, s) for e, s in asking if s is not None and e.tool_use_id in batched]
                        batch = batch_spec(members, run)
                        if checks:  # the tiers' approvers of its calls decide the batch
                            approvers = tuple(dict.fromkeys(a for _, s in members for a in s.approvers))
                            batch = replace(batch, approvers=approvers)
                        shared.append(self.service.new_request(batch))
                        await self.service.stage(unit, shared[0])
                    return shared[0]

                for position, (execution, spec) in enumerate(prepared):
                    batched_call = spec is not None and execution.tool_use_id in batched
                    execution = await self._gated(unit, execution, spec, checks.get(position),
                                                  batch_request if batched_call else None)
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

    async def _gated(self, unit: RunUnit, execution: ToolExecution, spec: ApprovalSpec | None,
                     checked: Checked | None, batch: Callable[[], Awaitable[Request]] | None) -> ToolExecution:
        """One call of the turn as policy or a person gates it, its request staged in `unit`: allowed by
        the tier's default, decided by policy, on the turn's batch card (`batch`), or on a card of its own."""
        if checked is not None and checked.request is None:  # the tier's default allows it
            assert checked.evaluation is not None
            return execution.evolve(gate=Gate.ALLOW, status=ExecStatus.READY,
                                    final_input=execution.input, risk=checked.evaluation.tier.value)
        if checked is not None and checked.request is not None and not checked.pending:
            await self._gate().stage(self.service, unit, checked)  # denied or allowed by policy
            return execution.evolve(request_id=checked.request.id)
        if batch is not None:
            return execution.evolve(request_id=(await batch()).id)
        if checked is not None and checked.request is not None:  # asks on its own card
            await self._gate().stage(self.service, unit, checked)
            return execution.evolve(request_id=checked.request.id)
        if spec is not None:
            request = self.service.new_request(spec)
            await self.service.stage(unit, request)
            return execution.evolve(request_id=request.id)
        return execution

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

