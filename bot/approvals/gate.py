"""Policy at submit: every way a request arrives (the agent API, Signoff's runner, anything that
uses `Service.submit` or `Service.stage`) passes through `PolicyGate.check` before it is written.

    deny  -> the request is written already rejected (`via: policy`, the rule in the decision's
             comment, the audit and `policy` in the API); no card.
    allow -> written already approved (`via: policy` with the rule, or `via: grant` with the
             grant id); medium (and any allow-rule tier above low) also gets an FYI in the
             channel, through the outbox, after the fact.
    ask   -> today's pending request and card, with the tier's approvers and timing defaults
             filled in where the request gave none.

Delegation applies to every pending request, policy file or not: an approver who is away has
their delegate added as an approver, and the card says so.

Without a policy file nothing is evaluated: requests ask exactly as before.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from bot.outbox import effects
from bot.approvals.access import Directory
from bot.domain.duties import able_to_approve
from bot.domain.batch import overall
from bot.domain.batch_policy import BatchRefused, judge_items
from bot.domain.durations import compact
from bot.domain.undo import UNDO_KEY
from bot.domain.assist import NOTE_KEY, WANTS_NOTE_KEY
from bot.domain.grants import Delegation, GrantIndex, agent_of, delegates_for, run_of
from bot.domain.model import AuditEvent, Decision, Kind, Outcome, Request, Status, Via, iso
from bot.domain.params_hash import params_sha256
from bot.domain.policy import Call, Effect, Evaluation, evaluate
from bot.domain.timing import DEFAULT, Timing
from bot.errors import InvalidInput, NotBatchable
from storage.group_commit import GroupCommit
from bot.approvals.homes import user_ids
from bot.policy.holder import PolicyHolder
from bot.approvals.submit import Submitting
from bot.approvals.types import ApprovalSpec, StaleCheck
from storage.base import Expect, StaleRead, Unit
from storage.grants import DELEGATION_STAMP, GRANT_STAMP, GrantStore

log = logging.getLogger(__name__)

TIMING_PARTS = ("reminders", "escalation", "timeout")
INDEX_CACHE_TOOLS = 1024


@dataclass(frozen=True)
class Checked:
    """What policy made of a request: the request to write (pending or already decided), the
    people to index for App Home, and the evaluation (None: no policy file)."""

    request: Request | None  # None: allowed by the tier's default and the caller records nothing
    people: tuple[str, ...]
    evaluation: Evaluation | None
    spec: ApprovalSpec | None = None  # the spec with policy applied (the runner batches pending ones)
    # Evaluated on the tool's cached grant index without reading its stamp: `stage` reads the stamp
    # in the unit and raises StaleCheck if it is no longer this one (None: nothing to verify).
    stamp: tuple[Any, ...] | None = None
    tool: str | None = None
    # Delegations taken from the gate's cached copy: `stage` reads their stamp in the unit and raises
    # StaleCheck if a delegation started or ended since (None: read afresh, nothing to verify).
    delegations_stamp: tuple[Any, ...] | None = None

    @property
    def pending(self) -> bool:
        """A person decides (the request asks)."""
        return self.request is not None and self.request.is_pending


def call_of(spec: ApprovalSpec) -> Call:
    return Call(
        tool=spec.action.name, params=spec.action.params, destructive=spec.destructive,
        # The runner's declared tool risk is the operator's; an agent's `risk` may only raise the tier.
        risk=spec.risk if spec.trusted else None, asked_risk=None if spec.trusted else spec.asked_risk,
        requester=spec.requested_by, requester_user=spec.requester_user if spec.trusted else None,
        channel=spec.channel,
        run_id=run_of(spec.extra),  # Signoff's run, or the session the agent named
        agent=agent_of(spec.extra),
    )


def apply_evaluation(spec: ApprovalSpec, evaluation: Evaluation) -> ApprovalSpec:
    """THE mapping from an Evaluation to request fields (the only one: keep it that way).

    The bar comes from policy (and, for Signoff's own runner, the operator); what an agent asked
    for only ever adds to it:
    - risk: the evaluated tier (already the higher of policy's and the agent's);
    - approvers: the tier's when it names any (the agent's are kept in `extra["asked"]` for the
      card, and its escalation levels only notify); the runner's SIGNOFF_RUN_APPROVERS before the
      tier's; the agent's only when nobody configured any;
    - quorum: the larger; self-approval only if both allow it; the tier's typed confirmation,
      else the request's;
    - timing: reminders the request gave, else the tier's; the tier's escalation chain when it
      sets one; the request's timeout only when it is at least as strict as the tier's (ends no
      later, or the tier's would approve; a request's timeout never approves: bot.api.timing_in).
    What the agent asked above policy is recorded in `extra["asked"]` (the card says so).
    """
    asked: dict[str, Any] = {}
    if evaluation.policy_tier is not None:
        asked["risk"] = {"asked": evaluation.tier.value, "policy": evaluation.policy_tier.value}
    configured = evaluation.approvers
    approvers = spec.approvers or configured
    if configured and not spec.trusted:
        approvers = configured
        ignored = [a for a in spec.approvers if a not in configured]
        if ignored:
            asked["approvers"] = ignored
    timing = spec.timing
    if timing is not None:
        timing = _timing(spec, timing, evaluation, asked, agent_levels_add=not (configured and not spec.trusted))
    quorum = max(spec.quorum, evaluation.quorum)
    if spec.quorum > evaluation.quorum and not spec.trusted:
        asked["quorum"] = spec.quorum
    if not spec.trusted and quorum > 1 and (spec.quorum > evaluation.quorum or not configured):
        _check_quorum(approvers, () if configured else spec.approver_users, quorum, spec,
                      whose="policy names" if configured else "the request names")
    extra = {**spec.extra, "asked": asked} if asked else dict(spec.extra)
    extra.pop(UNDO_KEY, None)  # the undo window is policy's alone
    if evaluation.undo is not None:
        extra[UNDO_KEY] = int(evaluation.undo.total_seconds())
    extra.pop(WANTS_NOTE_KEY, None)  # and so is the AI note
    extra.pop(NOTE_KEY, None)
    if evaluation.note:
        extra[WANTS_NOTE_KEY] = True
    # Separation of duties and quorum: the stricter of the request and its tier holds, so neither
    # an API field nor a tier can loosen what the other asks for.
    return replace(
        spec, approvers=tuple(approvers), timing=timing, risk=evaluation.tier, quorum=quorum, extra=extra,
        requester_may_approve=spec.requester_may_approve and evaluation.requester_may_approve,
        confirm=evaluation.confirm or spec.confirm,
    )


def _timing(spec: ApprovalSpec, timing: Timing, evaluation: Evaluation, asked: dict[str, Any], *,
            agent_levels_add: bool) -> Timing:
    """`timing` (the request's parts, else the server's) with the tier's parts applied (see apply_evaluation)."""
    given = spec.timing_given if not spec.trusted else frozenset()
    agent_levels = "escalation" in given
    for part in TIMING_PARTS:
        value = getattr(evaluation, part)
        if value is DEFAULT:
            continue
        if part == "reminders":
            if part in given:
                continue
            every, count = value if value is not None else (None, 0)
            timing = replace(timing, remind_every=every, remind_max=count)
        elif part == "escalation":
            if value is None and part in given:
                continue  # the tier escalates to nobody: the request's chain only adds people to notify
            levels, loops = value if value is not None else ((), 0)
            timing = replace(timing, levels=levels, loops=loops)
            agent_levels = False
        else:
            mine = (timing.timeout, timing.timeout_outcome) if timing.timeout is not None else None
            if part in given and _at_least_as_strict(mine, value):
                if mine != value and mine is not None:
                    asked["timeout"] = compact(mine[0])
                continue
            after, outcome = value if value is not None else (None, Outcome.EXPIRED)
            timing = replace(timing, timeout=after, timeout_outcome=outcome)
    if timing.timeout_outcome is Outcome.APPROVED and evaluation.timeout != (timing.timeout, Outcome.APPROVED):
        # Only policy makes silence approve (the API refuses it in a body; kept here for any other caller).
        timing = replace(timing, timeout_outcome=Outcome.EXPIRED)
    if agent_levels and not agent_levels_add and any(lv.add_as_approvers for lv in timing.levels):
        # The agent's own chain notifies whom it names; it never adds approvers to the tier's.
        timing = replace(timing, levels=tuple(replace(lv, add_as_approvers=False) for lv in timing.levels))
    return timing


def _at_least_as_strict(mine: tuple[Any, Outcome] | None, tier: tuple[Any, Outcome] | None) -> bool:
    """Whether the request's timeout asks no less than the tier's: it never approves (the API refuses
    that), so it is as strict when the tier's has none or would approve, else when it ends no later."""
    if mine is not None and mine[1] is Outcome.APPROVED:
        return False
    if tier is None or tier[1] is Outcome.APPROVED:
        return True
    return mine is not None and mine[0] <= tier[0]


def _check_quorum(approvers: Sequence[str], members: Sequence[str], quorum: int, spec: ApprovalSpec, *,
                  whose: str) -> None:
    """A quorum that the approvers can never reach is a 400, not a card that waits forever. `members`:
    of the listed user groups, when known (else a list with a group is not checked)."""
    people = able_to_approve(approvers, members, None if spec.requester_may_approve else spec.requester_user)
    if not approvers or people is None:
        return
    if quorum > len(people):
        message = (f"needs {quorum} distinct approvers but {whose} only {len(people)} "
                   f"{'person' if len(people) == 1 else 'people'} able to approve")
        raise InvalidInput(f"invalid request body: quorum: {message}", details=[{"field": "quorum", "message": message}])


def _decided(request: Request, evaluation: Evaluation, now: datetime) -> Request:
    """`request`, already decided by policy (deny -> rejected, allow -> approved)."""
    outcome = Outcome.REJECTED if evaluation.outcome is Effect.DENY else Outcome.APPROVED
    if request.items:  # each action was decided by policy on its own (bot.domain.batch_policy)
        outcome = overall(request.items)
    decision = Decision(
        outcome=outcome, params=request.action.params, changes=(), items=request.items,
        comment=evaluation.reason if evaluation.outcome is Effect.DENY else None,
        decided_by=None, decided_at=now, via=Via.GRANT if evaluation.grant_id else Via.POLICY,
        params_sha256=params_sha256(request.action.params),  # what runs is bound to what policy saw
    )
    return request.evolve(status=Status(outcome.value), decision=decision, next_due_at=None)


class PolicyGate:
    def __init__(self, holder: PolicyHolder, grants: GrantStore, directory: Directory | None) -> None:
        self.holder = holder
        self.grants = grants
        self.directory = directory
        self._indexes: dict[str, tuple[tuple[Any, ...], GrantIndex]] = {}
        self._group: tuple[Submitting, GroupCommit[Checked]] | None = None
        # (stamp, read at, every live delegation newest first): see `_delegations_of`.
        self._delegations: tuple[tuple[Any, ...], datetime, list[Delegation]] | None = None

    async def recheck_edit(self, request: Request, params: dict[str, Any], *, form_open: bool = True) -> str | None:
        """A person's edit, re-evaluated: refused if a deny rule or a deny grant refuses the edited call.
        `form_open`: said in the edit form (change it back), else once it has closed (edit it again).

        Allow grants and allow rules change nothing here (a person is approving it); only denials,
        which a person's approval does not override at submit either, can make an edit impossible.
        The tool's grant index is the one submits use (its stamp read: one small query).
        """
        policy = self.holder.policy
        if policy is None:
            return None
        call = Call(tool=request.action.name, params=params, risk=request.risk, requester=request.requested_by,
                    requester_user=request.requester_user, channel=request.channel,
                    run_id=run_of(request.extra), agent=agent_of(request.extra))
        now = self.holder.clock.now()
        index = await self._index(call.tool, now)
        evaluation = evaluate(policy, call, index, now)
        if evaluation.outcome is not Effect.DENY:
            return None
        if evaluate(policy, replace(call, params=request.action.params), index, now).outcome is Effect.DENY:
            # A deny made (or a policy reloaded) after the request was posted covers the call as asked too.
            return f"Policy now denies this call: {evaluation.reason}. Reject the request."
        fix = "Change it back" if form_open else "Edit it again"
        return f"Policy does not allow this edit: {evaluation.reason}. {fix} or reject the request."

    async def evaluate(self, call: Call, now: datetime) -> Evaluation | None:
        """The evaluation of `call` under the loaded policy and the live grants of its tool (None: no policy)."""
        return (await self._evaluate(call, now, verify_later=False))[0]

    async def _evaluate(self, call: Call, now: datetime, *,
                        verify_later: bool) -> tuple[Evaluation | None, tuple[Any, ...] | None]:
        """(evaluation, stamp to verify in the unit). `verify_later` with the tool's index cached: no read
        here, the cached index's stamp is returned for `stage` to verify in its transaction (on the
        hottest path that read was a pool checkout and, on PostgreSQL, three round trips of its own)."""
        policy = self.holder.policy
        if policy is None:
            return None, None
        cached = self._indexes.get(call.tool) if verify_later else None
        if cached is not None:
            return evaluate(policy, call, cached[1], now), cached[0]
        return evaluate(policy, call, await self._index(call.tool, now), now), None

    async def _index(self, tool: str, now: datetime) -> GrantIndex:
        """The tool's grant index, rebuilt only when the tool's grants changed in any process.

        The stamp is read before the rows: a revocation that lands between the two reads changes
        the stamp after it was taken, so the next call rebuilds (never keeps a revoked grant).
        Expiry needs no rebuild: `find` checks it against `now`.
        """
        stamp = await self.grants.stamp(tool)
        cached = self._indexes.get(tool)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        index = GrantIndex(await self.grants.for_tool(tool, now))
        if len(self._indexes) >= INDEX_CACHE_TOOLS:
            self._indexes.clear()
        self._indexes[tool] = (stamp, index)
        return index

    async def check(self, service: Submitting, spec: ApprovalSpec, *, idempotency_key: str | None = None,
                    body_hash: str | None = None, record_defaults: bool = True,
                    verify_later: bool = False) -> Checked:
        """The request `spec` becomes under policy (not written yet: `stage` writes it).

        `record_defaults=False` (the runner): a call allowed by its tier's default, with no rule
        or grant involved, needs no request row (the run's own audit records it).
        `verify_later` (Service.submit): the tool's cached grant index may be used unread; `stage`
        then verifies it in the unit and raises StaleCheck if grants changed meanwhile.
        """
        now = service.clock.now()
        evaluation, stamp = None, None
        judged: dict[str, Any] = {}
        if spec.items and spec.kind is not Kind.QUESTION:
            spec, evaluation, judged = await self._judge_batch(spec, now)
        elif spec.kind is not Kind.QUESTION:  # a question is asked, never allowed or denied by policy
            evaluation, stamp = await self._evaluate(call_of(spec), now, verify_later=verify_later)
        if evaluation is not None:
            if (not record_defaults and evaluation.outcome is Effect.ALLOW and evaluation.rule is None
                    and evaluation.grant_id is None):
                return Checked(None, (), evaluation)
            spec = apply_evaluation(spec, evaluation)
        people = tuple(spec.approver_users)
        if evaluation is not None and not spec.approver_users and spec.approvers:
            people = await self._members(spec.approvers)
        delegated: tuple[Delegation, ...] = ()
        delegations_stamp = None
        if evaluation is None or evaluation.outcome is Effect.ASK:
            users = user_ids([*spec.approvers, *people])
            live, delegations_stamp = await self._delegations_of(users, now, verify_later=verify_later)
            delegated = delegates_for(users, live, now)
        extra = dict(spec.extra)
        if evaluation is not None:
            extra["policy"] = {**evaluation.to_json(), **judged}
        if delegated:
            extra["delegations"] = [{"user": d.user, "delegate": d.delegate, "until": iso(d.until),
                                     "added": d.delegate not in spec.approvers} for d in delegated]
            spec = replace(spec, approvers=tuple(dict.fromkeys([*spec.approvers, *(d.delegate for d in delegated)])))
        request = service.new_request(replace(spec, extra=extra), idempotency_key=idempotency_key,
                                      body_hash=body_hash)
        if evaluation is not None and evaluation.outcome is not Effect.ASK:
            request = _decided(request, evaluation, request.created_at)
        return Checked(request, people, evaluation, spec, stamp, spec.action.name if stamp is not None else None,
                       delegations_stamp)

    async def _judge_batch(self, spec: ApprovalSpec, now: datetime
                           ) -> tuple[ApprovalSpec, Evaluation | None, dict[str, Any]]:
        """Each action of a batch judged as if submitted alone (bot.domain.batch_policy): the spec
        with policy's own item decisions, the batch's evaluation, and each item's for the record."""
        evaluations = []
        for item in spec.items:
            evaluation, _ = await self._evaluate(call_of(replace(spec, action=item.action, items=())), now,
                                                 verify_later=False)
            if evaluation is None:  # no policy file (it was unloaded meanwhile): the batch asks as it is
                return spec, None, {}
            evaluations.append(evaluation)
        try:
            items, evaluation = judge_items(spec.items, evaluations)
        except BatchRefused as refused:
            raise NotBatchable(f"invalid request body: items: {refused}",
                               details=[{"field": "items", "message": str(refused)}]) from None
        return replace(spec, items=items), evaluation, {"items": [e.to_json() for e in evaluations]}

    async def _delegations_of(self, users: list[str], now: datetime, *,
                              verify_later: bool) -> tuple[Sequence[Delegation], tuple[Any, ...] | None]:
        """(live delegations that may concern `users`, stamp for `stage` to verify or None).

        `verify_later` (Service.submit): from the cached copy of every live delegation, read once and
        again only after a unit found its stamp moved (a delegation started or ended in some process);
        `stage` verifies the stamp in its transaction, so a pending request never goes out with a
        delegation missing that was committed before it. The copy holds what was live when it was read;
        `delegates_for` checks each window against `now` (a clock behind the read: read afresh).
        Otherwise the users' delegations are read as they are now (one read, nothing to verify).
        """
        if not users:
            return (), None
        if not verify_later:
            return await self.grants.delegations_of(users, now), None
        cached = self._delegations
        if cached is None or now < cached[1]:
            stamp, live = await self.grants.live_delegations(now)
            cached = self._delegations = (stamp, now, live)
        return cached[2], cached[0]

    async def still_delegate(self, request: Request, user_id: str, now: datetime) -> bool:
        """False when `user_id` is an approver of `request` only as a delegate, and that delegation
        has ended (`/signoff back`, or its window ran out): returning ends it."""
        entries = [d for d in request.extra.get("delegations") or []
                   if isinstance(d, dict) and d.get("delegate") == user_id and d.get("added")]
        if not entries:
            return True
        live = await self.grants.delegations_of([str(e["user"]) for e in entries], now)
        return any(d.delegate == user_id and d.active(now) for d in live)

    async def _members(self, approvers: tuple[str, ...]) -> tuple[str, ...]:
        """Members of the tier's user groups (App Home's index); Slack down: none, the request still asks."""
        if self.directory is None:
            return ()
        members: list[str] = []
        for entry in approvers:
            if entry.startswith("S"):
                try:
                    members.extend(sorted(await self.directory.group_members(entry)))
                except Exception:  # an unknown or unreachable group: its members just miss the App Home entry
                    log.warning("could not list the members of %s", entry, exc_info=True)
        return tuple(dict.fromkeys(members))

    async def write(self, service: Submitting, checked: Checked) -> None:
        """Write the checked request in a unit of its own (Service.submit). A request decided at submit
        (no card: the hottest path) shares its unit with the others decided meanwhile (storage/group_commit.py);
        either way this returns once its unit committed."""
        request = checked.request
        assert request is not None
        if request.is_pending:
            await service.store.run_change(lambda unit: self.stage(service, unit, checked))
            return
        if self._group is None or self._group[0] is not service:
            self._group = (service, GroupCommit(lambda group: self._write_group(service, group)))
        await self._group[1].submit(checked)

    async def _write_group(self, service: Submitting, group: Sequence[Checked]) -> None:
        async with service.store.unit() as unit:
            verified: dict[str, tuple[Any, ...]] = {}  # each tool's stamp read once per unit
            for checked in group:
                await self.stage(service, unit, checked, verified=verified)

    async def _stage_pending(self, service: Submitting, unit: Unit, checked: Checked) -> None:
        """A pending request, with the stamps its check relied on (the tool's grants, the delegations)
        verified by its write: in the same statement on PostgreSQL, so that alone in its change the
        statement is the whole change. A moved stamp writes nothing and the request is checked again, afresh."""
        request = checked.request
        assert request is not None
        expects = []
        if checked.stamp is not None:
            assert checked.tool is not None
            tool = checked.tool
            expects.append(Expect(lambda unit: self.grants.stamp_in(unit, tool), GRANT_STAMP, checked.stamp, (tool,)))
        if checked.delegations_stamp is not None:
            expects.append(Expect(self.grants.delegation_stamp_in, DELEGATION_STAMP, checked.delegations_stamp))
        try:
            await service.stage(unit, request, people=checked.people, expects=expects)
        except StaleRead:
            # Which one moved is not told: the next check reads both afresh.
            if checked.tool is not None:
                self._indexes.pop(checked.tool, None)
            self._delegations = None
            raise StaleCheck(checked.tool or "delegations") from None

    async def stage(self, service: Submitting, unit: Unit, checked: Checked, *,
                    verified: dict[str, tuple[Any, ...]] | None = None) -> None:
        """Write the checked request in the caller's unit: pending (card) or decided (no card), the
        last write of its request. `verified`: the stamps this unit already read (by tool), read again otherwise."""
        request = checked.request
        assert request is not None
        if request.is_pending:
            await self._stage_pending(service, unit, checked)
            return
        if checked.stamp is not None:
            assert checked.tool is not None
            stamps = verified if verified is not None else {}
            if checked.tool not in stamps:
                stamps[checked.tool] = await self.grants.stamp_in(unit, checked.tool)
            if stamps[checked.tool] != checked.stamp:
                self._indexes.pop(checked.tool, None)  # the next check reads them afresh
                raise StaleCheck(checked.tool)
        assert request.decision is not None and checked.evaluation is not None
        evaluation, decision = checked.evaluation, request.decision
        await unit.insert_decided(request, [  # the row, its decision, both audit rows and the notify at once
            AuditEvent(request.id, "created", request.created_at, request.requested_by, {"risk": request.risk.value}),
            AuditEvent(request.id, "decided", decision.decided_at, None, {
                "outcome": decision.outcome.value, "via": decision.via.value, "rule": evaluation.rule,
                "grant_id": evaluation.grant_id, "tier": evaluation.tier.value, "reason": evaluation.reason,
                "changes": []})])
        hook = effects.decided_webhook(request, decision.decided_at)
        if hook is not None:
            await unit.enqueue(hook)
        if evaluation.fyi and evaluation.outcome is Effect.ALLOW:
            await unit.enqueue(effects.policy_fyi(request.id, decision.decided_at))
        # Counted and woken only if the unit commits, like a person's decision.
        created = service.metrics.requests_created.labels(request.kind.value, request.risk.value)
        decided = service.metrics.decisions.labels(decision.outcome.value, decision.via.value)
        unit.after_commit(created.inc)
        unit.after_commit(decided.inc)
        service.touch(unit, request.id)


def policy_gate(service: Submitting) -> PolicyGate | None:
    """The service's gate when it is the policy gate with a policy file loaded, else None."""
    gate = service.gate
    return gate if isinstance(gate, PolicyGate) and gate.holder.policy is not None else None
