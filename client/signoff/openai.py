"""OpenAI Agents SDK runs ask Signoff before gated tools run, and resume from people's decisions anywhere.

    from agents import Agent
    from signoff.openai import Approvals

    approvals = Approvals("runs/", channel="C0123ABCD")   # paused runs are kept in runs/, one JSON file each

    @approvals.tool                                      # function_tool, gated by Signoff
    async def send_email(to: str, subject: str) -> str:
        ...

    agent = Agent(name="mailer", tools=[send_email])
    result = await approvals.run(agent, "Send the refund email", run_id="ticket-42")   # asks, waits, resumes

Or without waiting in the process that started the run:

    result = await Runner.run(agent, "Send the refund email", context=approvals.context("ticket-42"))
    await approvals.pause(result, run_id="ticket-42")     # one card for the turn's calls; the state saved
    ...                                                 # later, in any process:
    resumed = await approvals.resume(agent, "ticket-42")  # None while undecided, or when another resumed it

or `signoff openai resume --agent myapp:agent` (signoff.openai_cli), woken by long-polls or webhooks.

Invariants:
- Policy first: a gated tool's `needs_approval` asks Signoff's policy (`POST /api/v1/policy/check`,
  nothing written). Allowed calls run without interrupting; every other call interrupts, and a call
  policy denies is rejected with the policy's reason, with no card: it never runs. No answer from
  Signoff interrupts (fail closed). The SDK asks only when it can show the parsed arguments; a call
  it cannot (defaults filled in, custom validators) always interrupts and goes on the card.
- One card per turn: the turn's calls that a person decides go on one request (a batch card for
  several, each decided on its own), under an Idempotency-Key of the run and turn: pausing again,
  from any process, finds that card and never posts a second.
- Exactly once: a resume is claimed on the Signoff server first (`/api/v1/resumes`, a key per run,
  turn, request and calls); only the holder loads the saved state, applies the decisions, runs on
  (renewing its lease), saves the next pause or the end, and then finishes the claim. Two resumers
  never both resume; a finished claim is never applied again. A resumer that takes over the claim
  of one that died does not run its approved calls again: the model is told their outcome is unknown.
- Edits: a person's edited parameters travel in the resumed run's context (`EDITS_KEY`, by call id,
  the SDK's `ToolContext` pattern) and a gated tool runs with them, validated by the tool's own
  schema; the model's own call stays in its history as it made it. Tools this module did not gate
  are offered approve or reject only (their edits could not reach them).
- Per run: the run's context names it (`RUN_KEY`; `approvals.context(run_id)` for a `Runner.run` of
  your own), each policy check and card carries it as `session`, so a grant "for this run" applies.
- Receipts: after a resume ran an approved call, what ran is reported to Signoff (`ran` with the
  parameters used and a short result, or `failed` with a gated tool's exception); a call that did not
  run, or whose resume was taken over (it may or may not have run), reports nothing.
- Signed: every decision read is checked against the server's Ed25519 key before anything is applied
  (signoff.signatures): a forged, altered or replayed one raises `SignatureInvalid` and nothing runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from signoff._protocol import MAX_LONG_POLL, undeliverable
from signoff.errors import SignoffError, SignoffRequestError, UndeliverableError
from signoff.models import Decision, final_decision
from signoff.openai_runs import (EDITS_KEY, RUN_KEY, FileStore, Outcome, PausedCall, PausedRun, RunStore, apply,
                                 check_run_id, outcomes, store_of)
from signoff.openai_tools import approved_args, carrying_edits, run_of, with_edits, with_run
from signoff.policy_check import Verdict
from signoff.resumes import DEFAULT_LEASE_SECONDS, ResumeClaim, ResumeTaken, default_owner

if TYPE_CHECKING:
    from signoff.client import AsyncSignoffClient

__all__ = ["EDITS_KEY", "RUN_KEY", "Approvals", "FileStore", "PausedRun", "approved_args"]

log = logging.getLogger("signoff.openai")
VERDICTS_MAX = 4096
FIRST_TURN = 1


def _offered(call: PausedCall) -> list[str]:
    """What the card offers for a call: "Reply instead" too (the model reads the reply as the call's output,
    and the tool does not run); Edit only when the edits can reach the tool."""
    return ["approve", "edit", "reject", "respond"] if call.editable else ["approve", "reject", "respond"]


class Approvals:
    """Signoff for one application's OpenAI agents: its gated tools, its paused runs, and their resumes.

    `store`: a folder (or a `RunStore`) where paused runs are kept; `client`: an `AsyncSignoffClient`
    (default: one from SIGNOFF_URL / SIGNOFF_TOKEN). Card options: `channel`, `approvers`, `risk`
    (only ever raises policy's tier; also sent with each policy check when given), `requested_by`,
    `timing`, `callback_url`, `summary` (a string, or a function of the turn's calls). `lease_seconds`:
    how long a resume claim outlives a resumer that dies (renewed every third of it while the run goes on).
    `report`: gets one line per run this object resumes (`signoff openai resume` prints them).
    """

    def __init__(self, store: RunStore | str, *, client: AsyncSignoffClient | None = None,
                 channel: str | None = None, approvers: Sequence[str] | None = None, risk: str | None = None,
                 requested_by: str | None = None, timing: Mapping[str, Any] | None = None,
                 callback_url: str | None = None, summary: str | Callable[[Sequence[PausedCall]], str] | None = None,
                 lease_seconds: int = DEFAULT_LEASE_SECONDS, owner: str | None = None,
                 report: Callable[[str], None] | None = None) -> None:
        self.store = store_of(store)
        self._client = client
        self._made: AsyncSignoffClient | None = None
        self.channel, self.approvers, self.risk = channel, list(approvers) if approvers else None, risk
        self.requested_by, self.timing, self.callback_url, self.summary = requested_by, timing, callback_url, summary
        self.lease_seconds, self.owner = lease_seconds, owner or default_owner()
        self.tools: dict[str, Any] = {}  # name -> FunctionTool gated here
        self.editable: set[str] = set()  # the names of those that run with a person's edits
        self._verdicts: OrderedDict[str, Verdict | None] = OrderedDict()  # call id -> policy's word (bounded)
        self.report = report
        self._running: dict[str, Outcome] = {}  # call id -> its approval, while a resume here runs it
        self._results: dict[str, tuple[Any, BaseException | None]] = {}  # call id -> how a gated tool's run ended

    @property
    def client(self) -> AsyncSignoffClient:
        if self._client is None:
            from signoff.client import AsyncSignoffClient

            self._client = self._made = AsyncSignoffClient()
        return self._client

    async def aclose(self) -> None:
        """Close the client this object made (one given to it is the giver's to close)."""
        if self._made is not None:
            await self._made.aclose()
            self._client = self._made = None

    async def __aenter__(self) -> Approvals:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- gating tools ---------------------------------------------------------------------

    def tool(self, func: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """`@approvals.tool` (or `@approvals.tool(name_override=..., ...)`, `function_tool`'s options):
        the SDK's `function_tool`, gated by Signoff: policy decides per call (`needs_approval`), and the
        function runs with the parameters a person approved (edited ones validated by its own schema)."""
        from agents import function_tool

        if "needs_approval" in options:
            raise SignoffError("needs_approval is Signoff's on a gated tool: leave it out")

        def make(f: Callable[..., Any]) -> Any:
            return self.gate(function_tool(carrying_edits(f, options, self._ran), **options), editable=True)

        return make(func) if func is not None else make

    def _ran(self, ctx: Any, result: Any, error: BaseException | None) -> None:
        call_id = str(getattr(ctx, "tool_call_id", ""))
        if call_id in self._running:  # an approved call of a resume here: its receipt is sent when the run returns
            self._results[call_id] = (result, error)

    def context(self, run_id: str, context: Any = None) -> Any:
        """The run's context naming `run_id` (give it to `Runner.run(..., context=...)`): each policy check
        then carries the run as its `session`, so a person's grant "for this run" applies to its calls."""
        return with_run(context, check_run_id(run_id))

    def gate(self, tool: Any, *, editable: bool = False) -> Any:
        """Gate an existing `FunctionTool` (policy decides per call through its `needs_approval`); the tool.

        `editable`: the tool applies a person's edits itself (`approved_args(ctx)`); otherwise its card
        offers approve and reject only."""
        name = str(tool.name)
        tool.needs_approval = self.needs_approval(name)
        self.tools[name] = tool
        if editable:
            self.editable.add(name)
        else:
            self.editable.discard(name)
        return tool

    def needs_approval(self, tool_name: str) -> Callable[[Any, dict[str, Any], str], Any]:
        """A `needs_approval` callable for the tool named `tool_name`: False only when policy allows the call."""

        async def decide(ctx: Any, params: dict[str, Any], call_id: str) -> bool:
            try:
                verdict: Verdict | None = await self.client.check_policy(
                    tool_name, params, risk=self.risk, channel=self.channel, requested_by=self.requested_by,
                    session=run_of(getattr(ctx, "context", None)))
            except SignoffError as exc:
                log.warning("Signoff's policy could not be asked about %s (%s): the call waits for a person", tool_name, exc)
                verdict = None
            self._verdicts[call_id] = verdict
            while len(self._verdicts) > VERDICTS_MAX:
                self._verdicts.popitem(last=False)
            return verdict is None or not verdict.allowed

        return decide

    # -- pausing ------------------------------------------------------------------------------

    async def pause(self, result: Any, run_id: str) -> PausedRun | None:
        """Save a run stopped at interruptions and post one card for the turn's calls; None when it finished.

        Safe to repeat: the same interruptions find the same turn and card."""
        check_run_id(run_id)
        if not result.interruptions:
            return None
        calls = tuple(self._paused_call(item) for item in result.interruptions)
        before = self.paused(run_id)
        same = before is not None and before.status == "paused" and \
            [c.call_id for c in before.calls] == [c.call_id for c in calls]
        turn = before.turn if same and before is not None else (before.turn + 1 if before is not None else FIRST_TURN)
        return await self._pause(result, run_id, turn, calls)

    async def _pause(self, result: Any, run_id: str, turn: int, calls: Sequence[PausedCall] | None = None) -> PausedRun:
        calls = tuple(calls) if calls is not None else tuple(self._paused_call(item) for item in result.interruptions)
        paused = PausedRun(run_id, turn, result.to_state().to_json(), await self._cards(run_id, turn, result, calls))
        self.store.save(run_id, paused.to_json())
        return paused

    def _paused_call(self, item: Any) -> PausedCall:
        call_id = str(getattr(item, "call_id", None) or getattr(getattr(item, "raw_item", None), "call_id", ""))
        name = str(getattr(item, "tool_name", None) or item.name)
        raw = getattr(item, "arguments", None)
        try:
            parsed = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
        except ValueError:
            parsed = None
        params = parsed if isinstance(parsed, dict) else {"arguments": raw}
        verdict = self._verdicts.get(call_id)
        if verdict is not None and verdict.denied:
            return PausedCall(call_id, name, params, "deny", verdict.reason, name in self.editable)
        return PausedCall(call_id, name, params, "ask", None, name in self.editable and isinstance(parsed, dict))

    def _summary(self, result: Any, calls: Sequence[PausedCall]) -> str:
        if callable(self.summary):
            return self.summary(calls)
        if self.summary:
            return self.summary
        agent = getattr(getattr(result, "last_agent", None), "name", None) or "The agent"
        names = ", ".join(dict.fromkeys(c.name for c in calls))
        return f"{agent} wants to run {names}" + (f" ({len(calls)} calls)" if len(calls) > 1 else "")

    async def _cards(self, run_id: str, turn: int, result: Any, calls: Sequence[PausedCall]) -> tuple[PausedCall, ...]:
        """The calls, each with the request that decides it: one batch card for the turn's calls that ask
        (one card of its own each when policy says a batch cannot carry one of them: `not_batchable`)."""
        asked = [c for c in calls if c.verdict != "deny"]
        if not asked:
            return tuple(calls)  # policy refused every call: nothing for a person to decide
        options: dict[str, Any] = {"channel": self.channel, "approvers": self.approvers,
                                   "requested_by": self.requested_by, "timing": self.timing,
                                   "callback_url": self.callback_url, "risk": self.risk, "session": run_id}
        decided_by: dict[str, tuple[str, int | None]] = {}
        if len(asked) > 1:
            items = [{"name": c.name, "params": c.params, "params_schema": self._schema(c),
                      "allowed_decisions": _offered(c), "key": c.call_id} for c in asked]
            try:
                batch = await self.client.submit_batch(items, summary=self._summary(result, asked),
                                                       idempotency_key=f"openai:{run_id}:{turn}", **options)
                decided_by = {c.call_id: (batch.id, n) for n, c in enumerate(asked)}
            except SignoffRequestError as exc:
                if exc.error_code != "not_batchable":
                    raise
                log.info("run %s: %s; asking about each call on its own card", run_id, exc.message)
        if not decided_by:
            for call in asked:  # keyed by call id: pausing again finds each card
                key = f"openai:{run_id}:{turn}" if len(asked) == 1 else f"openai:{run_id}:{turn}:{call.call_id}"
                one = await self.client.submit(call.name, call.params, params_schema=self._schema(call),
                                               allowed_decisions=_offered(call),
                                               summary=self._summary(result, [call]), idempotency_key=key, **options)
                decided_by[call.call_id] = (one.id, None)
        return tuple(replace(c, request_id=decided_by[c.call_id][0], item=decided_by[c.call_id][1])
                     if c.call_id in decided_by else c for c in calls)

    def _schema(self, call: PausedCall) -> dict[str, Any] | None:
        tool = self.tools.get(call.name)
        schema = getattr(tool, "params_json_schema", None) if call.editable else None  # the Edit form
        return dict(schema) if isinstance(schema, Mapping) else None

    # -- resuming --------------------------------------------------------------------------------

    def paused(self, run_id: str) -> PausedRun | None:
        """The run as the store has it (paused, or `status` "finished"), or None when it was never paused."""
        raw = self.store.load(run_id)
        return PausedRun.from_json(raw) if raw is not None else None

    async def decided(self, run_id: str, wait: float = 0.0) -> bool | None:
        """True when every call of the run's paused turn is decided (waiting up to `wait` seconds for it),
        False while a person has not, None when the run is not paused (finished, or never saved)."""
        paused = self.paused(check_run_id(run_id))
        if paused is None or paused.status != "paused":
            return None
        return (await self._decisions(paused, wait)) is not None

    async def _decisions(self, paused: PausedRun, wait: float) -> dict[str, Decision] | None:
        """Every request of the turn's decision (waiting up to `wait` seconds in all), or None while one is open."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        found: dict[str, Decision] = {}
        for request_id in paused.request_ids:
            body = await self._decision_body(request_id, max(0.0, deadline - loop.time()))
            decision = final_decision(body) if body is not None else None
            if decision is None:
                return None
            found[request_id] = decision
        return found

    async def _decision_body(self, request_id: str, wait: float) -> dict[str, Any] | None:
        """The request's JSON once it ended (a card nobody can see is cancelled: not approved), else None."""
        if wait > 0:
            try:
                await self.client.decision(request_id, timeout=wait)
            except UndeliverableError:
                pass  # read below, and cancelled
        body = await self.client.get(request_id)
        if final_decision(body) is None:
            refused = undeliverable(body)
            if refused is None:
                return None
            log.warning("run resumes as not approved: %s The request was cancelled.", refused.message)
            await self.client.cancel(request_id, refused.cancel_reason)
            body = await self.client.get(request_id)
        return body

    async def resume(self, agent: Any, run_id: str, *, wait: float = 0.0, context: Any = None,
                     **run_options: Any) -> Any:
        """Resume `run_id` once its turn is decided: the SDK's `RunResult` of the run that followed, or
        None (still undecided after `wait` seconds, not paused, or another resumer has it or had it).

        `context`: the run's context when it is not a plain mapping (the saved one is used otherwise);
        `run_options`: passed to `Runner.run` (max_turns, run_config, hooks...). When the run stops at new
        interruptions they are paused at once (a new card); `result.interruptions` says so."""
        paused = self.paused(check_run_id(run_id))
        if paused is None or paused.status != "paused":
            return None
        decisions = await self._decisions(paused, wait)
        if decisions is None:
            return None
        found = outcomes(paused, decisions)
        held = await self.client.get_resume(paused.key)
        if held is not None and held.state == "failed":
            raise SignoffError(f"resuming run {run_id} (turn {paused.turn}) failed earlier and is not retried: "
                               f"{held.raw.get('error') or 'no error was recorded'}. Start a new run.")
        claim = await self.client.claim_resume(paused.key, self.owner, lease_seconds=self.lease_seconds,
                                               request_ids=paused.request_ids)
        if claim is None:
            return None  # another resumer has it, or it was resumed already
        taken_over = held is not None and held.state == "resuming" and held.owner != self.owner
        now = self.paused(run_id)
        if now is None or now.key != paused.key or now.status != "paused":
            await self._finish(claim, "done")  # resumed by someone before us: nothing left to do
            return None
        try:
            result = await self._run(agent, paused, found, context, claim, taken_over, run_options)
        except Exception as exc:  # (a cancelled resume keeps its claim: its lease runs out, and it is taken over)
            await self._finish(claim, "failed", f"{type(exc).__name__}: {exc}")
            raise
        await self._finish(claim, "done")
        words = f"resumed run {run_id} (turn {paused.turn}): " + "; ".join(o.words for o in found)
        log.info("%s", words)
        if self.report is not None:
            self.report(words)
        return result

    async def _run(self, agent: Any, paused: PausedRun, found: Sequence[Outcome], context: Any, claim: ResumeClaim,
                   taken_over: bool, run_options: Mapping[str, Any]) -> Any:
        from agents import RunState, Runner

        assert paused.state is not None
        base = context if context is not None else (paused.state.get("context") or {}).get("context")
        base = with_run(base, paused.run_id)
        edits = {o.call.call_id: o.params for o in found if o.approved and o.params is not None and not taken_over}
        state = await RunState.from_json(agent, paused.state,
                                         context_override=with_edits(base, edits) if edits else base)
        apply(state, found, taken_over=taken_over)
        approved = {o.call.call_id: o for o in found if o.approved and not taken_over}
        self._running.update(approved)
        renewing = asyncio.create_task(self._renew(claim))
        result: Any = None
        try:
            result = await Runner.run(agent, state, **run_options)
        finally:
            renewing.cancel()
            await self._receipts(approved, result)
        if result.interruptions:
            await self._pause(result, paused.run_id, paused.turn + 1)  # the next turn, whatever its call ids
        else:
            self.store.save(paused.run_id, replace(paused, state=None, status="finished").to_json())
        return result

    async def _receipts(self, approved: Mapping[str, Outcome], result: Any) -> None:
        """Report what ran of the approved calls (execution receipts): a gated tool's own result or
        exception, else the output the SDK recorded for the call. A call that did not run gets none."""
        from agents.items import ToolCallOutputItem

        outputs: dict[str, Any] = {}
        for item in getattr(result, "new_items", None) or ():
            if isinstance(item, ToolCallOutputItem):
                raw = item.raw_item
                found = raw.get("call_id") if isinstance(raw, Mapping) else getattr(raw, "call_id", None)
                outputs[str(found)] = item.output
        for call_id, outcome in approved.items():
            self._running.pop(call_id, None)
            ended = self._results.pop(call_id, None)
            if ended is None and call_id not in outputs:
                continue
            value, error = ended if ended is not None else (outputs[call_id], None)
            request_id = outcome.call.request_id
            assert request_id is not None  # an approved call was decided by a request
            if error is not None:
                await self.client.report_quietly(request_id, "failed", params=outcome.ran_with,
                                                  error=f"{type(error).__name__}: {error}", item=outcome.item_key)
            else:
                await self.client.report_quietly(request_id, "ran", params=outcome.ran_with, result=value,
                                                  item=outcome.item_key)

    async def _renew(self, claim: ResumeClaim) -> None:
        while True:
            await asyncio.sleep(max(1.0, claim.lease_seconds / 3))
            try:
                claim = await self.client.renew_resume(claim)
            except ResumeTaken as lost:
                log.warning("resume %s was taken over by %s while this resumer ran it", claim.key, lost.owner)
                return
            except SignoffError as exc:
                log.warning("could not renew the lease of resume %s: %s", claim.key, exc)

    async def _finish(self, claim: ResumeClaim, state: str, error: str | None = None) -> None:
        try:
            await self.client.finish_resume(claim, state, error)
        except ResumeTaken as lost:
            log.warning("resume %s was taken over by %s while this resumer held it (it ran longer than its lease "
                        "and could not renew it); another resumer may have resumed it too", claim.key, lost.owner)

    # -- all in one process -----------------------------------------------------------------------------

    async def run(self, agent: Any, input: Any, *, run_id: str, context: Any = None, **run_options: Any) -> Any:
        """`Runner.run(agent, input)` to its end: each turn that stops at gated calls is paused (one card),
        waited for, and resumed here. The last `RunResult`; None if another process finished the run."""
        from agents import Runner

        result = await Runner.run(agent, input, context=self.context(run_id, context), **run_options)
        if await self.pause(result, run_id) is None:
            return result
        while True:
            resumed = await self.resume(agent, run_id, wait=MAX_LONG_POLL, context=context, **run_options)
            if resumed is not None:
                if not resumed.interruptions:
                    return resumed
                continue
            now = await self.decided(run_id)
            if now is None:
                return None  # finished by another process
            if now:
                await asyncio.sleep(1.0)  # decided, and another resumer holds it: look again after a while
