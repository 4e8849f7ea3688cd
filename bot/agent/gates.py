"""What the runner puts on the requests of a run's gated tool calls.

- Separation of duties: whoever started the run (`/signoff run` in Slack, or `requested_by`
  given as a user id on the API) is the requester of its cards and may not approve them.
- Typed confirmation: a critical tool's card asks to type the tool's name.
- Batches: several gated calls of one turn become one card (`batch_spec`); critical calls keep
  their own card, since each needs its own typed confirmation.

Policy tiers (issue 12a) will decide these per rule; this module is the one place the runner
asks, so that is where they plug in.
"""

from __future__ import annotations

from typing import Any

from bot.domain.batch import BATCH_ACTION, Item
from bot.domain.duties import default_may_approve, requester_user_of
from bot.domain.model import Action, Request, Risk
from bot.domain.params_hash import ParamsChanged, check_params
from bot.domain.runs import Gate, Run, ToolExecution
from bot.approvals.service import ApprovalSpec


def run_duties(run: Run, risk: Risk, tool_name: str) -> dict[str, Any]:
    """ApprovalSpec fields for one gated call of `run`."""
    requester = requester_user_of(run.requested_by)
    return {
        "requester_user": requester,
        "requester_may_approve": default_may_approve(requester, None),
        "confirm": tool_name if risk is Risk.CRITICAL else None,
    }


def batchable(spec: ApprovalSpec) -> bool:
    """Whether a gated call may share a batch card (not a question, no typed confirmation)."""
    return spec.confirm is None and spec.kind.value == "approval" and spec.quorum == 1


def batch_members(prepared: list[tuple[ToolExecution, ApprovalSpec | None]]) -> set[str]:
    """The tool_use_ids of a turn's gated calls that share one batch card (none if fewer than two)."""
    members = {e.tool_use_id for e, s in prepared if s is not None and e.gate is Gate.ASK and batchable(s)}
    return members if len(members) >= 2 else set()


def batch_spec(specs: list[tuple[str, ApprovalSpec]], run: Run) -> ApprovalSpec:
    """One request for several gated calls of one turn: `specs` are (tool_use_id, spec) in turn order."""
    first = specs[0][1]
    names = ", ".join(dict.fromkeys(s.action.name for _, s in specs))
    risk = Risk.CRITICAL if any(s.risk is Risk.CRITICAL for _, s in specs) else max(
        (s.risk for _, s in specs), key=lambda r: list(Risk).index(r))
    items = tuple(Item(s.action, s.preview, key=tool_use_id) for tool_use_id, s in specs)
    return ApprovalSpec(
        action=Action(BATCH_ACTION, {}, None),
        summary=f"{len(specs)} tool calls: {names}",
        risk=risk,
        channel=first.channel,
        context=first.context,
        requested_by=first.requested_by,
        extra={"run_id": run.id, "tool_use_ids": [t for t, _ in specs]},
        thread_ts=first.thread_ts,
        requester_user=first.requester_user,
        requester_may_approve=first.requester_may_approve,
        approvers=first.approvers,  # SIGNOFF_RUN_APPROVERS, as on a single card
        trusted=True,  # the runner's own specs: risk and approvers from operator config
        items=items,
    )


def approved_params_problem(request: Request | None, tool_use_id: str, params: dict[str, Any]) -> str | None:
    """Why `params` must not run for this gated call (None: they are exactly what was approved).

    Checks the hash the decision carries (`params_sha256`, or the batch item's) against the
    parameters about to run, so nothing but the approved parameters ever runs, whatever happened
    to the execution row in between. Fails closed: no approved decision, no run.
    """
    decision = request.decision if request is not None else None
    if request is None or decision is None:
        return "its approval request has no decision"
    approved: dict[str, Any] = decision.to_json()
    if decision.items:
        approved = next((i for i in approved["items"] or () if i.get("key") == tool_use_id), {})
    try:
        check_params(approved, params)
    except ParamsChanged as exc:
        return str(exc)
    return None
