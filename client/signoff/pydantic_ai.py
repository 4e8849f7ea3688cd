"""Pydantic AI agents stop at the tools a person must approve, and continue with what the person decided.

    from pydantic_ai import Agent, DeferredToolRequests
    from signoff.pydantic_ai import Paused, SignoffApprovals

    approvals = SignoffApprovals(channel="C0123ABCD")      # wait=0: end the run when a person must decide
    agent = Agent(model, output_type=[str, DeferredToolRequests], capabilities=[approvals.capability()])

    @agent.tool_plain(requires_approval=True)
    def send_email(to: str, subject: str) -> str: ...

    result = await agent.run("Send the refund email")
    if isinstance(result.output, DeferredToolRequests):
        paused = await approvals.pause(result)           # the card is in Slack; keep paused.to_json() anywhere
    ...
    result = await approvals.resume(agent, Paused.from_json(saved))   # any process, once decided

A process that can wait asks inline instead: `SignoffApprovals(wait=None)` (or a number of seconds)
long-polls the decision inside the run and goes on with it; `agent.run` returns the model's answer.

Invariants:
- Policy first. Every call that a step defers for approval is checked against Signoff's policy
  (`POST /api/v1/policy/check`) before anyone is asked. A call policy allows or denies is submitted
  alone (the server decides it at once by the same policy and records it; no card) and answered in
  the run: allowed calls run without interrupting it, denied ones never run (the model reads the
  rule's reason). The rest of the step goes on one card (a batch card when several calls are left),
  each call decided on its own.
- One step, one card: the request's Idempotency-Key is made of the run's conversation id and the
  step's calls (their `tool_call_id`s), so the handler, a retry and `pause()` all reach the same card.
- Exactly what was decided: an approved call runs with the decision's parameters
  (`ToolApproved(override_args=...)`, checked against the decision's `params_sha256`), a person's
  edits included; a rejection is `ToolDenied` with who rejected and their reason ("Reply instead":
  their reply); a request nobody decided (expired, cancelled, its card refused by Slack) is denied.
- Fail closed: Signoff unreachable raises from the run (nothing runs); `resume` of a request still
  pending raises `StillPending` and runs nothing.
- Resumed exactly once, from any process on any machine: `resume` holds a claim on the Signoff
  server (`pydantic-ai:<request id>`) while it continues the run, and finishes it `done` (or `failed`
  with the error). A second resumer, concurrent or later, gets None and runs nothing. A resumer that
  takes over the claim of one that died mid-run (its lease ran out) does not run the approved calls
  again (they may have run): the model is told their outcome is unknown.
- The card is typed: each call's Edit form is its tool's own parameters JSON schema (read from the run's
  tool definitions; `pause(result, agent)` reads them from the agent), and it offers "Reply instead".
- Receipts: each approved call reports what it did to the request that approved it (`ran` with the
  arguments it ran with and a short result, `failed` with its exception) from inside the run (the
  capability wraps the tool's execution; `resume` adds it to the run it makes).
- Signed: every decision read is checked against the server's Ed25519 key first (signoff.signatures); a
  forged, altered or replayed one raises `SignatureInvalid` and nothing runs.

Pydantic AI is imported when a function here is called: importing this module needs only `signoff`.
Tested with pydantic-ai-slim 2.78 (the `HandleDeferredToolCalls` capability, `DeferredToolResults`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from signoff.errors import SignoffError, SignoffRequestError, StillPending, UndeliverableError
from signoff.models import Decision
from signoff.pydantic_ai_steps import (OFFERED, Approved, Asked, Paused, PausedCall, agent_schemas, answers,
                                       approved_calls, call_args, claim_key, clean_schema, not_again, step_key)
from signoff.resumes import DEFAULT_LEASE_SECONDS, ResumeClaim, ResumeTaken

if TYPE_CHECKING:
    from pydantic_ai.capabilities import AbstractCapability, HandleDeferredToolCalls
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, RunContext

    from signoff.client import AsyncSignoffClient, AsyncSubmission

__all__ = ["Asked", "Paused", "PausedCall", "SignoffApprovals", "answers", "claim_key", "step_key"]

log = logging.getLogger("signoff.pydantic_ai")


def _need_pydantic_ai() -> None:
    try:
        import pydantic_ai  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise SignoffError("signoff.pydantic_ai needs Pydantic AI: pip install 'signoff[pydantic-ai]'") from exc


class SignoffApprovals:
    """Signoff as the approver of a Pydantic AI agent's deferred tool calls.

    `wait`: how long a run waits inline for a person (seconds; None: as long as it takes; 0, the
    default: not at all, the run ends with `DeferredToolRequests` and `pause`/`resume` continue it).
    When an inline wait runs out the run ends the same way, its card still open.
    Card options: `channel`, `approvers`, `risk` (unset: policy's tier; given, it only ever raises it),
    `requested_by`, `timing`, `context`; `summary` (a string, or a function of the calls), `preview`
    (a function of a tool's name and arguments returning a Signoff preview, or None).
    `client`: an `AsyncSignoffClient` (default: one from SIGNOFF_URL / SIGNOFF_TOKEN per call).
    """

    def __init__(self, *, client: AsyncSignoffClient | None = None, wait: float | None = 0.0,
                 channel: str | None = None, approvers: Sequence[str] | None = None, risk: str | None = None,
                 requested_by: str | None = None, timing: Mapping[str, Any] | None = None,
                 context: str | None = None, summary: str | Callable[[Sequence[PausedCall]], str] | None = None,
                 preview: Callable[[str, dict[str, Any]], Mapping[str, Any] | None] | None = None,
                 lease_seconds: int = DEFAULT_LEASE_SECONDS) -> None:
        if wait is not None and wait < 0:
            raise SignoffError(f"wait must be 0 or more seconds (None: no limit), not {wait}")
        self.client, self.wait = client, wait
        self.card: dict[str, Any] = {k: v for k, v in {
            "channel": channel, "approvers": list(approvers) if approvers else None, "risk": risk,
            "requested_by": requested_by, "timing": dict(timing) if timing else None, "context": context}.items()
            if v is not None}
        self.summary, self.preview, self.lease_seconds = summary, preview, lease_seconds
        self._schemas: dict[str, dict[str, Any]] = {}  # tool name -> its parameters' JSON schema (the Edit form)
        self._approved: dict[str, Approved] = {}  # tool call id -> the approval it runs on (for its receipt)

    # -- in the run ----------------------------------------------------------------------------

    def capability(self) -> HandleDeferredToolCalls[Any]:
        """The capability to give the agent (`Agent(..., capabilities=[approvals.capability()])`): it answers
        the deferred approvals (`handle`) and reports what each approved call did (an execution receipt)."""
        _need_pydantic_ai()
        answering, _ = _capability_types()
        made: HandleDeferredToolCalls[Any] = answering(handler=self.handle, approvals=self)
        return made

    def receipts(self) -> AbstractCapability[Any]:
        """A capability that only reports what approved calls did (`resume` adds it to the run itself)."""
        _need_pydantic_ai()
        _, reporting = _capability_types()
        made: AbstractCapability[Any] = reporting(approvals=self)
        return made

    async def run_reporting(self, call: ToolCallPart, args: Any, handler: Callable[[Any], Any]) -> Any:
        """Run an approved call (`handler`, the tool's own execution) and report how it ended to the request
        that approved it: `ran` with the arguments used and a short result, or `failed` with the error,
        which is raised on as before. Calls no Signoff decision approved here just run."""
        approved = self._approved.pop(call.tool_call_id, None)
        if approved is None:
            return await handler(args)
        used = dict(args) if isinstance(args, Mapping) else approved.params
        try:
            result = await handler(args)
        except Exception as exc:
            async with self._client() as client:
                await client.report_quietly(approved.request_id, "failed", params=used, item=approved.item,
                                            error=f"{type(exc).__name__}: {exc}")
            raise
        async with self._client() as client:
            await client.report_quietly(approved.request_id, "ran", params=used, result=result, item=approved.item)
        return result

    def _answers(self, decision: Decision, call_ids: Sequence[str]) -> dict[str, Any]:
        """`answers`, noting the approved calls for their receipts."""
        found = answers(decision, call_ids)
        self._approved.update(approved_calls(decision, call_ids))
        return found

    async def handle(self, ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults | None:
        """Answer a step's deferred approvals: policy's at once, a person's when one decides in `wait`."""
        from pydantic_ai.tools import DeferredToolResults

        if not requests.approvals:
            return None  # external calls are not Signoff's to answer
        for name, tool in ctx.tools.items():  # the Edit form is the tool's own schema
            schema = clean_schema(getattr(tool, "parameters_json_schema", None))
            if schema is not None:
                self._schemas[name] = schema
        async with self._client() as client:
            decided, asking = await self._policy_first(client, ctx.conversation_id, requests)
            if asking:
                asked = await self._submit_step(client, ctx.conversation_id, asking, requests.validated_args)
                # All of the step's asked calls or none: what the run ends on is then exactly what was
                # asked, and `pause` finds the same request(s) by the same keys.
                decided.update(await _answered(client, asked, self.wait, self._answers) or {})
        return DeferredToolResults(approvals=decided) if decided else None

    async def _policy_first(self, client: AsyncSignoffClient, conversation_id: str | None,
                            requests: DeferredToolRequests) -> tuple[dict[str, Any], list[ToolCallPart]]:
        """(answers for the calls policy decides, the calls left for a person)."""
        calls = list(requests.approvals)
        actions: list[dict[str, Any]] = [{"name": c.tool_name, "params": call_args(c, requests.validated_args)}
                                         for c in calls]
        decided: dict[str, Any] = {}
        asking: list[ToolCallPart] = []
        for call, action in zip(calls, actions, strict=True):
            if await self._verdict(client, action, conversation_id) not in ("allow", "deny"):
                asking.append(call)
                continue
            # Submitted alone: the server decides it by the same policy, records it, posts no card.
            summary = self._summary_of([call], requests.validated_args)
            alone = await client.submit(action["name"], action["params"], summary=summary,
                                        idempotency_key=step_key(conversation_id, [call.tool_call_id], "policy"),
                                        session=conversation_id, **self._options(action))
            ended = alone.decision
            if ended is None:  # policy changed between the check and the submit: ask on the step's card
                ended = await client.cancel(alone.id, "policy changed while Signoff was asked; asked again on the "
                                                      "step's card")
                if ended.outcome == "cancelled":
                    asking.append(call)
                    continue
            decided.update(self._answers(ended, [call.tool_call_id]))
        return decided, asking

    async def _verdict(self, client: AsyncSignoffClient, action: Mapping[str, Any],
                       conversation_id: str | None) -> str:
        """Policy's outcome for the call (allow | deny | ask); "ask" from a server without the check (404)."""
        try:
            verdict = await client.check_policy(action["name"], action["params"], risk=self.card.get("risk"),
                                                channel=self.card.get("channel"),
                                                requested_by=self.card.get("requested_by"), session=conversation_id)
        except SignoffRequestError as exc:
            if exc.status != 404:
                raise
            return "ask"  # an older server: a person decides, the safe side
        return verdict.outcome

    # -- ending the run and continuing it later ---------------------------------------------------

    async def pause(self, result: Any, agent: Any = None) -> Paused:
        """The card for the calls a finished run (`agent.run`'s result) ended on, and what `resume` needs.

        Finds the card the run's handler posted (or posts it, for an agent run without the capability:
        give `agent` so that its Edit form is the tool's own schema). Save `paused.to_json()` anywhere;
        `Paused.from_json` reads it back in any process."""
        from pydantic_ai.tools import DeferredToolRequests

        output = result.output
        if not isinstance(output, DeferredToolRequests) or not output.approvals:
            raise SignoffError("pause() takes the result of a run that ended on deferred tool calls needing approval "
                               "(output_type=[str, DeferredToolRequests] and requires_approval=True tools)")
        if output.calls:
            raise SignoffError(f"the run also waits on {len(output.calls)} external call(s) (CallDeferred / external "
                               "tools): Signoff answers approvals only; answer those calls yourself")
        conversation_id = getattr(result, "conversation_id", None)
        if agent is not None:
            self._schemas.update({k: v for k, v in agent_schemas(agent).items() if k not in self._schemas})
        async with self._client() as client:
            asked = await self._submit_step(client, conversation_id, list(output.approvals), output.validated_args,
                                            reuse=True)
        calls = tuple(PausedCall(c.tool_call_id, c.tool_name, call_args(c, output.validated_args))
                      for c in output.approvals)
        return Paused(tuple(Asked(s.id, ids) for s, ids in asked), calls, json.loads(result.all_messages_json()),
                      conversation_id)

    async def resume(self, agent: Any, paused: Paused, *, wait: float | None = 0.0, owner: str | None = None,
                     **run_options: Any) -> Any:
        """Continue the paused run with the person's decisions: the new run's result (it may pause again),
        or None when another resumer holds or finished this resume (nothing ran here).

        `wait`: how long to wait for the decision (0: not at all); still pending after it raises
        `StillPending`. `run_options` go to `agent.run` (deps, usage limits, ...)."""
        _need_pydantic_ai()
        from pydantic_ai.messages import ModelMessagesTypeAdapter
        from pydantic_ai.tools import DeferredToolResults

        async with self._client() as client:
            loop = asyncio.get_running_loop()
            deadline = None if wait is None else loop.time() + wait
            approvals: dict[str, Any] = {}
            ready: dict[str, Approved] = {}
            for part in paused.asked:  # `wait` bounds them all together
                left = None if deadline is None else max(0.0, deadline - loop.time())
                decision = await _decision(client, part.request_id, left)
                if decision is None:
                    raise StillPending(f"{part.request_id} is not decided yet: nothing was resumed",
                                       request_id=part.request_id)
                approvals.update(answers(decision, part.call_ids))
                ready.update(approved_calls(decision, part.call_ids))
            results = DeferredToolResults(approvals=approvals)
            history = ModelMessagesTypeAdapter.validate_python(paused.history)
            held = await client.get_resume(paused.claim_key)
            if held is not None and held.state != "resuming":
                return None  # resumed (or failed, kept with its error): never again
            claim = await client.claim_resume(paused.claim_key, owner, lease_seconds=self.lease_seconds,
                                              request_ids=paused.request_ids)
            if claim is None:
                return None  # another resumer holds it, its lease still running
            if held is not None:  # taken over from a resumer that stopped mid-run: what it approved may have run
                log.warning("taking over %s from %s, which stopped mid-run: its approved calls are not run again",
                            held.key, held.owner)
                results = DeferredToolResults(approvals=not_again(results.approvals))
            else:
                self._approved.update(ready)  # their receipts: reported as each runs
            options = {**run_options, "capabilities": [*run_options.get("capabilities", ()), self.receipts()]}
            renewing = asyncio.create_task(_renew(client, claim))
            try:
                result = await agent.run(message_history=history, deferred_tool_results=results, **options)
            except BaseException as exc:
                await _finish(client, claim, "failed", f"{type(exc).__name__}: {exc}")
                raise
            finally:
                renewing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewing
            await _finish(client, claim, "done")
            return result

    # -- plumbing -------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _client(self) -> AsyncIterator[AsyncSignoffClient]:
        if self.client is not None:
            yield self.client
            return
        from signoff.client import AsyncSignoffClient

        async with AsyncSignoffClient() as made:  # per call: a run may be on any event loop
            yield made

    def _options(self, action: Mapping[str, Any]) -> dict[str, Any]:
        shown = self.preview(action["name"], dict(action["params"])) if self.preview is not None else None
        return {**self.card, **({"preview": dict(shown)} if shown is not None else {})}

    def _summary_of(self, calls: Sequence[ToolCallPart], validated: Mapping[str, Mapping[str, Any]]) -> str:
        if isinstance(self.summary, str):
            return self.summary
        if self.summary is not None:
            return self.summary([PausedCall(c.tool_call_id, c.tool_name, call_args(c, validated))
                                 for c in calls])
        names = [c.tool_name for c in calls]
        return f"Run {names[0]}" if len(names) == 1 else f"Run {len(names)} tool calls: {', '.join(names)}"

    async def _submit_step(self, client: AsyncSignoffClient, conversation_id: str | None,
                           calls: Sequence[ToolCallPart], validated: Mapping[str, Mapping[str, Any]], *,
                           reuse: bool = False) -> list[tuple[AsyncSubmission, tuple[str, ...]]]:
        """The request(s) for the calls a person decides: one card, a batch card for several; one card
        per call when policy puts one at a tier a batch cannot carry (`not_batchable`: nothing was stored).
        Each offers approve, edit (the tool's own schema is the form), reject and "Reply instead".
        `reuse`: a request already made under the step's key is taken as it is (`pause` after the handler)."""
        if len(calls) > 1:
            items = []
            for call in calls:
                params = call_args(call, validated)
                shown = self.preview(call.tool_name, dict(params)) if self.preview is not None else None
                items.append({"name": call.tool_name, "params": params, "allowed_decisions": OFFERED,
                              "key": call.tool_call_id,
                              "params_schema": self._schemas.get(call.tool_name),
                              **({"preview": dict(shown)} if shown is not None else {})})
            key = step_key(conversation_id, [c.tool_call_id for c in calls])
            try:
                batch = await _made(client, key) if reuse else None
                if batch is None:
                    batch = await _schema_or_not(lambda drop: client.submit_batch(
                        [{**i, "params_schema": None} for i in items] if drop else items,
                        summary=self._summary_of(calls, validated), idempotency_key=key, session=conversation_id,
                        **self.card), any(i["params_schema"] for i in items))
                return [(batch, tuple(c.tool_call_id for c in calls))]
            except SignoffRequestError as exc:
                if exc.error_code != "not_batchable":
                    raise
        asked: list[tuple[AsyncSubmission, tuple[str, ...]]] = []
        for call in calls:
            action: dict[str, Any] = {"name": call.tool_name, "params": call_args(call, validated)}
            key = step_key(conversation_id, [call.tool_call_id])
            schema = self._schemas.get(call.tool_name)
            alone = await _made(client, key) if reuse else None
            if alone is None:
                alone = await _schema_or_not(lambda drop: client.submit(
                    action["name"], action["params"], summary=self._summary_of([call], validated),
                    idempotency_key=key, session=conversation_id, allowed_decisions=OFFERED,
                    params_schema=None if drop else schema, **self._options(action)), schema is not None)
            asked.append((alone, (call.tool_call_id,)))
        return asked


async def _made(client: AsyncSignoffClient, key: str) -> AsyncSubmission | None:
    """The request this token made under Idempotency-Key `key`, or None."""
    from signoff.client import AsyncSubmission

    found = await client.find(key)
    return AsyncSubmission(str(found["id"]), found, False, client, key) if found is not None else None


async def _schema_or_not(submit: Callable[[bool], Any], has_schema: bool) -> Any:
    """`submit(False)`, with the tool schema(s); a schema Signoff cannot use for its form (400, nothing
    stored) is dropped and `submit(True)` asks without it (the form then follows the parameters)."""
    try:
        return await submit(False)
    except SignoffRequestError as exc:
        if not has_schema or exc.status != 400:
            raise
        log.info("a tool schema Signoff cannot use for the Edit form (%s): asking without it", exc.message)
        return await submit(True)


def _capability_types() -> tuple[Any, Any]:
    """(the capability answering deferred approvals and reporting receipts, the one only reporting), made
    on first use (they subclass Pydantic AI's, imported only then)."""
    if not _TYPES:
        from dataclasses import dataclass, field

        from pydantic_ai.capabilities import AbstractCapability, HandleDeferredToolCalls

        @dataclass
        class SignoffCapability(HandleDeferredToolCalls[Any]):
            approvals: Any = field(default=None, kw_only=True)

            async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
                return await self.approvals.run_reporting(call, args, handler)

        @dataclass
        class SignoffReceipts(AbstractCapability[Any]):
            approvals: Any = field(default=None, kw_only=True)

            async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
                return await self.approvals.run_reporting(call, args, handler)

        _TYPES.extend([SignoffCapability, SignoffReceipts])
    return _TYPES[0], _TYPES[1]


_TYPES: list[Any] = []


async def _answered(client: AsyncSignoffClient, asked: Sequence[tuple[AsyncSubmission, tuple[str, ...]]],
                    wait: float | None, answer: Callable[[Decision, Sequence[str]], dict[str, Any]]) -> dict[str, Any] | None:
    """The answers to every asked call once all their requests are decided, waiting up to `wait` seconds
    in all (None: no limit; 0: not at all); None if any is still pending then."""
    loop = asyncio.get_running_loop()
    deadline = None if wait is None else loop.time() + wait
    found: dict[str, Any] = {}
    for submitted, call_ids in asked:
        ended = submitted.decision
        if ended is None and wait != 0:
            left = None if deadline is None else max(0.0, deadline - loop.time())
            ended = await _decision(client, submitted.id, left)
        if ended is None:
            return None
        found.update(answer(ended, call_ids))
    return found


async def _decision(client: AsyncSignoffClient, request_id: str, wait: float | None) -> Decision | None:
    """The request's decision within `wait` seconds (None: no limit), else None. A card Slack refused is
    cancelled (nobody can see it): that cancellation is the decision, unless someone decided first."""
    try:
        return await client.decision(request_id, wait)
    except UndeliverableError as exc:
        log.warning("%s", exc.message)
        return await client.cancel(request_id, exc.cancel_reason)


async def _renew(client: AsyncSignoffClient, claim: ResumeClaim) -> None:
    while True:
        await asyncio.sleep(claim.lease_seconds / 3)
        try:
            await client.renew_resume(claim)
        except ResumeTaken as lost:
            log.warning("lost the claim on %s to %s while resuming it", claim.key, lost.owner)
            return
        except SignoffError as exc:
            log.warning("could not renew the claim on %s: %s", claim.key, exc)


async def _finish(client: AsyncSignoffClient, claim: ResumeClaim, state: str, error: str | None = None) -> None:
    try:
        await client.finish_resume(claim, state, error)
    except ResumeTaken as lost:
        log.warning("resume %s was taken over by %s while this resumer held it", claim.key, lost.owner)
