"""What agents see: the JSON of requests, questions and runs, in one place.

The agent API, the webhooks (and the MCP server and Python client that read them) share these
shapes; a field added here reaches every one of them. Pure functions of domain values: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bot.domain.delivery_state import delivery_json
from bot.domain.batch import offered
from bot.domain.choices import EXTRA_KEY, allowed_decisions
from bot.domain.model import Item, Outcome, Request, Status, Via
from bot.domain.outcomes import NOT_REPORTED, OUTCOME_KEY, STATE_KEY
from bot.domain.questions import answers_of, questions_of
from bot.domain.runs import Run, ToolExecution
from bot.domain.suggestions import ACCEPTED_KEY
from bot.domain.timing import TimerState
from bot.domain.values import iso


def request_json(request: Request) -> dict[str, Any]:
    """The request as the agent API and webhooks show it."""
    body: dict[str, Any] = {
        "id": request.id,
        "kind": request.kind.value,
        "status": request.status.value,
        "action": {
            "name": request.action.name,
            "params": request.action.params,
            "params_schema": request.action.params_schema,
        },
        "summary": request.summary,
        "context": request.context,
        "preview": {"kind": request.preview.kind, **request.preview.data} if request.preview else None,
        "risk": request.risk.value,
        "channel": request.channel,
        "approvers": list(request.approvers),
        "callback_url": request.callback_url,
        "requested_by": request.requested_by,
        # As stored (an agent token's `<token name>:<key>`): the decision's signature covers it, so an agent
        # can tell its own request's decision from another's (client/signoff/signatures.py).
        "idempotency_key": request.idempotency_key,
        "created_at": iso(request.created_at),
        "updated_at": iso(request.updated_at),
        "card": {"channel": request.card_channel, "ts": request.card_ts} if request.card_ts else None,
        "delivery": delivery_json(request),
        "decision": _decision_json(request),
        "timing": request.timing.to_json() if request.timing else None,
        "timers": timers_json(request.timers) if request.timers else None,
        "quorum": request.quorum,
        "requester_may_approve": request.requester_may_approve,
        "confirm": request.confirm,
        "requester_user": request.requester_user,
        "votes": [v.to_json() for v in request.votes],
        "items": [item_json(i) for i in request.items] if request.items else None,
        # What ran after the decision (an execution receipt, bot/domain/outcomes.py), kept apart from
        # the proposal (`action.params`) and the decision (`decision.params`); `outcome_status` says
        # "not_reported" for an approval whose outcome nobody reported (yet).
        "outcome": request.extra.get(OUTCOME_KEY),
        "outcome_status": outcome_status(request),
        # Issue 12, present only when they apply: how the policy file evaluated it; what the agent asked
        # for above policy (bot/approvals/gate.py); delegates added.
        # ...and the Claude permission suggestions the agent sent (bot/domain/suggestions.py).
        **{key: request.extra[key] for key in ("policy", "asked", "delegations", "suggestions", "session", STATE_KEY)
           if key in request.extra},
    }
    if EXTRA_KEY in request.extra:  # only when the agent chose them (bot/domain/choices.py)
        body["allowed_decisions"] = list(allowed_decisions(request.kind, request.extra))
    return body


def outcome_status(request: Request) -> str | None:
    """What is known of what ran: ran / failed / skipped / unknown, "not_reported" for an approval
    nobody reported on, None when nothing was approved (or, for a batch, per item in `outcome`)."""
    recorded = request.extra.get(OUTCOME_KEY)
    if isinstance(recorded, dict) and "status" in recorded:
        return str(recorded["status"])
    if request.items:
        items = recorded.get("items") if isinstance(recorded, dict) else None
        approved = [i.key for i in request.items if i.outcome is Outcome.APPROVED]
        if not approved:
            return None
        return "reported" if isinstance(items, dict) and all(k in items for k in approved) else NOT_REPORTED
    if request.status is Status.APPROVED:
        return NOT_REPORTED
    return None


def item_json(item: Item) -> dict[str, Any]:
    """A batch item as agents see it: the proposal, and (while pending) its edits and decision so far."""
    preview = item.preview
    return {
        "action": {"name": item.action.name, "params": item.action.params,
                   "params_schema": item.action.params_schema},
        "preview": {"kind": preview.kind, **preview.data} if preview else None,
        "key": item.key,
        "outcome": item.outcome.value if item.outcome else None,
        "params": item.final_params,
        "changes": [c.to_json() for c in item.changes],
        "comment": item.comment,
        "via": item.via.value if item.via else None,
        "decided_by": item.decided_by.to_json() if item.decided_by else None,
        # Only when the agent chose them, as for a single request (bot/domain/choices.py).
        **({"allowed_decisions": list(offered(item))} if item.allowed is not None else {}),
    }


def decided_json(request: Request) -> dict[str, Any]:
    """The part of `request_json` a decision is read from (id, kind, status, decision): a Claude Code HTTP
    hook's answer to a decided call needs no more, and the whole of it costs more than the answer."""
    return {"id": request.id, "kind": request.kind.value, "status": request.status.value,
            "decision": _decision_json(request)}


def _decision_json(request: Request) -> dict[str, Any] | None:
    """The decision; one made by policy or a grant also names its rule or grant."""
    if request.decision is None:
        return None
    body = request.decision.to_json()
    policy = request.extra.get("policy")
    if request.decision.via in (Via.POLICY, Via.GRANT) and isinstance(policy, dict):
        body["rule"], body["grant_id"] = policy.get("rule"), policy.get("grant_id")
    if STATE_KEY in request.extra:  # the state the preview (and so the approval) was made on
        body["state"] = request.extra[STATE_KEY]
    accepted = request.extra.get(ACCEPTED_KEY)
    if isinstance(accepted, dict):  # the Claude suggestion the person accepted: {index, update, grant_ids}
        body["suggestion"] = accepted
    return body


def question_json(request: Request) -> dict[str, Any]:
    """A question request: the request's fields plus its questions and (once answered) the answers."""
    body = request_json(request)
    body["questions"] = questions_of(request)
    body["answers"] = answers_of(request)
    return body


def timers_json(state: TimerState | None) -> dict[str, Any]:
    """Where a request stands on its timeline (ISO times)."""
    if state is None:
        return {}
    return {
        "reminders_sent": state.reminders_sent,
        "next_reminder_at": iso(state.remind_at),
        "escalation_level": state.level,
        "escalation_loop": state.loop,
        "escalated_to": list(state.escalated_to),
        "next_escalation_at": iso(state.escalate_at),
        "expires_at": iso(state.expires_at),
        "snoozed_until": iso(state.snoozed_until),
    }


def run_json(run: Run, executions: Iterable[ToolExecution]) -> dict[str, Any]:
    """A run, with every tool call it made (as recorded, by tool_use_id)."""
    return {
        "id": run.id,
        "status": run.status.value,
        "task": run.task,
        "channel": run.channel,
        "agent": run.agent,
        "requested_by": run.requested_by,
        "step_count": run.step_count,
        "messages": run.next_seq,
        "root": {"channel": run.channel, "ts": run.root_ts} if run.root_ts else None,
        "cancel_requested": run.cancel_requested,
        "result": run.result,
        "error": run.error,
        "failed_steps": run.failed_steps,
        "retries": run.retries,
        "step_limit": run.step_limit,
        "created_at": iso(run.created_at),
        "updated_at": iso(run.updated_at),
        "tool_calls": [
            {"tool_use_id": e.tool_use_id, "name": e.name, "status": e.status.value, "gate": e.gate.value,
             "risk": e.risk, "input": e.input, "final_input": e.final_input, "request_id": e.request_id,
             "is_error": e.is_error, "attempts": e.attempts}
            for e in executions
        ],
    }
