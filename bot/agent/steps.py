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

from bot.agent.model_step import ModelStep
from bot.agent.step_values import StepResult
from bot.agent.tool_step import ToolStep
from bot.domain.runs import Phase


class Steps(ModelStep, ToolStep):
    """One step of a run at a time: the model's, or its tools' (bot/agent/model_step.py, bot/agent/tool_step.py),
    each write fenced by the run's lease (bot/agent/run_writes.py)."""

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

