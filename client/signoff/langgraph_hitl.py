"""Interrupts to Signoff requests, and Signoff decisions back to each interrupt's resume value.

Three kinds of interrupt are understood (anything else is not Signoff's and is left alone):
- `approval()` / `ask()` values (`{"signoff": {"request_id", "kind"}}`): the request exists; the
  resume value is the ended request's JSON, read back by the node.
- LangChain HumanInTheLoopMiddleware, batched (`{"action_requests", "review_configs"}`): one
  request for the interrupt, a batch (one card, a decision per action, each action offering its
  own `allowed_decisions`) when it holds several actions; resumed with `{"decisions": [...]}` in
  the actions' order, once every action is decided (the batch request ends with its last action).
- The same middleware in `per_call` mode (`{"type": "tool_approval", ...}`): one request; resumed
  with one decision, keyed by the interrupt's id. Its `response_schema` says which decisions are
  allowed and, for edits, the tool's argument schema (it drives the Edit form).

Decisions map to LangChain's as its docs describe: approved unchanged -> `approve`; approved with
changes -> `edit` (`edited_action` = the tool name and the approved args); "Reply instead" ->
`respond` (the reply becomes the tool's result; the tool does not run); rejected -> `reject`
(with the reason as `message` when one was given). Expired or cancelled requests fail closed:
`reject`, saying nobody approved in time; in a batch, per action (an action a person decided
before the batch ended keeps that decision).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from signoff._steps import Steps, call
from signoff.errors import SignoffError, SignoffRequestError
from signoff.langgraph_keys import MARKER, interrupt_key
from signoff.models import Decision, ItemDecision, final_decision

SUMMARY_MAX = 3000
CONTEXT_MAX = 20000
CARD_OPTIONS = ("channel", "approvers", "risk", "requested_by", "timing", "callback_url")


def kind_of(value: Any) -> str | None:
    """"signoff", "batched", "per_call", or None for an interrupt that is not Signoff's to answer."""
    if not isinstance(value, Mapping):
        return None
    if isinstance(value.get(MARKER), Mapping) and value[MARKER].get("request_id"):
        return "signoff"
    if isinstance(value.get("action_requests"), list) and isinstance(value.get("review_configs"), list):
        return "batched"
    if value.get("type") == "tool_approval" and value.get("name"):
        return "per_call"
    return None


def requests_for(thread_id: str, interrupt: Any, card: Mapping[str, Any]) -> Steps[list[str] | None]:
    """The request ids that answer `interrupt` (submitting them through "client" if needed), or None if it
    is not ours. Steps (signoff._steps): the blocking and the asyncio resumer both run them."""
    value = interrupt.value
    kind = kind_of(value)
    if kind is None:
        return None
    if kind == "signoff":
        return [str(value[MARKER]["request_id"])]
    prefix = interrupt_key("hitl", thread_id, interrupt.id, "")
    return (yield from submit_actions(prefix, actions_of(interrupt), card))


def actions_of(interrupt: Any) -> list[dict[str, Any]]:
    """The actions an interrupt asks about: name, args, description, allowed, args_schema."""
    value = interrupt.value
    if kind_of(value) == "per_call":
        schema = interrupt.response_schema if isinstance(interrupt.response_schema, Mapping) else {}
        return [{"name": value["name"], "args": dict(value.get("args") or {}), "description": value.get("description"),
                 "allowed": _allowed_in_schema(schema), "args_schema": _args_schema(schema)}]
    configs = {c.get("action_name"): c for c in value["review_configs"] if isinstance(c, Mapping)}
    actions = []
    for request in value["action_requests"]:
        config = configs.get(request.get("name")) or {}
        actions.append({"name": request["name"], "args": dict(request.get("args") or {}),
                        "description": request.get("description"),
                        "allowed": list(config.get("allowed_decisions") or ["approve", "edit", "reject"]),
                        "args_schema": config.get("args_schema")})
    return actions


def submit_actions(prefix: str, actions: Sequence[Mapping[str, Any]], card: Mapping[str, Any]) -> Steps[list[str]]:
    """The requests that ask about `actions`: one batch for several (key `prefix` + "batch"), else one request.

    Critical actions cannot be batched (each needs its own typed confirmation): one request each.
    """
    options = {k: v for k, v in card.items() if k in CARD_OPTIONS and v is not None}
    if len(actions) > 1 and options.get("risk") != "critical":
        try:
            return [(yield from _submit_batch(f"{prefix}batch", actions, options))]
        except SignoffRequestError as exc:
            if exc.error_code != "not_batchable":
                raise
            # Policy puts one of them at a tier a batch cannot meet (nothing was stored): one request each.
    ids = []
    for index, action in enumerate(actions):
        kwargs = dict(summary=_summary(action), context=action.get("description"),
                      idempotency_key=f"{prefix}{index}", allowed_decisions=action["allowed"], **options)
        schema = action.get("args_schema")
        try:
            submitted = yield call("client", "submit", action["name"], action["args"], params_schema=schema, **kwargs)
        except SignoffRequestError as exc:
            if schema is None or exc.status != 400:
                raise
            # A tool schema Signoff cannot use for its form: ask without it (nothing was stored).
            submitted = yield call("client", "submit", action["name"], action["args"], **kwargs)
        ids.append(submitted.id)
    return ids


def _submit_batch(key: str, actions: Sequence[Mapping[str, Any]], options: Mapping[str, Any]) -> Steps[str]:
    items = [{"name": a["name"], "params": a["args"], "params_schema": a.get("args_schema"),
              "allowed_decisions": a["allowed"], "key": str(n)} for n, a in enumerate(actions)]
    summary = f"{len(actions)} actions: " + ", ".join(_summary(a) for a in actions)
    notes = [f"{n}. {a['name']}: {a['description']}" for n, a in enumerate(actions, 1) if a.get("description")]
    kwargs = dict(summary=summary[:SUMMARY_MAX], context="\n\n".join(notes)[:CONTEXT_MAX] or None,
                  idempotency_key=key, **options)
    try:
        return str((yield call("client", "submit_batch", items, **kwargs)).id)
    except SignoffRequestError as exc:
        if exc.status != 400 or not any(i["params_schema"] for i in items):
            raise
        # A tool schema Signoff cannot use for its form: ask without them (nothing was stored).
        return str((yield call("client", "submit_batch", [{**i, "params_schema": None} for i in items], **kwargs)).id)


def resume_value(interrupt: Any, bodies: Sequence[Mapping[str, Any]]) -> Any:
    """What to resume `interrupt` with, from its requests' ended JSON (in `requests_for` order)."""
    kind = kind_of(interrupt.value)
    if kind == "signoff":
        return dict(bodies[0])
    actions = actions_of(interrupt)
    if len(actions) > 1 and len(bodies) == 1:  # one batch request for all of them
        return {"decisions": batch_to_langchain(actions, bodies[0])}
    decisions = [to_langchain(action, body) for action, body in zip(actions, bodies, strict=True)]
    return decisions[0] if kind == "per_call" else {"decisions": decisions}


def to_langchain(action: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
    """One LangChain HITL decision from an ended Signoff request, within the action's allowed decisions."""
    decision = _ended(body)
    return _choose(action, decision.outcome, decision.params, decision.comment, decision.reply)


def batch_to_langchain(actions: Sequence[Mapping[str, Any]], body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One LangChain decision per action, in order, from an ended batch request's per-item decisions."""
    decision = _ended(body)
    if len(decision.items) != len(actions):
        raise SignoffError(f"{body.get('id')} holds {len(decision.items)} actions, the interrupt {len(actions)}",
                           request_id=str(body.get("id")))
    return [_item_choice(action, item, decision) for action, item in zip(actions, decision.items, strict=True)]


def _item_choice(action: Mapping[str, Any], item: ItemDecision, batch: Decision) -> dict[str, Any]:
    if item.name != action["name"]:
        raise SignoffError(f"action {item.index + 1} of {batch.request_id} is {item.name}, not {action['name']}",
                           request_id=batch.request_id)
    if item.outcome is None:  # the batch ended (expired, cancelled) before anyone decided this action
        return _refuse(action, f"nobody approved it in Slack (the request {batch.outcome})")
    return _choose(action, item.outcome, item.params, item.comment, item.reply)


def _ended(body: Mapping[str, Any]) -> Decision:
    decision = final_decision(body)
    if decision is None:
        raise SignoffError(f"{body.get('id')} is still pending", request_id=str(body.get("id")))
    return decision


def _choose(action: Mapping[str, Any], outcome: str, params: Mapping[str, Any], comment: str | None,
            reply: str | None) -> dict[str, Any]:
    allowed = set(action["allowed"])
    if outcome == "approved":
        if "approve" in allowed and params == action["args"]:
            return {"type": "approve"}
        if "edit" in allowed:
            return {"type": "edit", "edited_action": {"name": action["name"], "args": dict(params)}}
        return _refuse(action, "it was approved with changes, which this action does not allow")
    if reply is not None and "respond" in allowed:
        return {"type": "respond", "message": reply}
    if outcome == "rejected":
        return _refuse(action, None) if not comment else _refuse(action, None, message=comment)
    return _refuse(action, f"nobody approved it in Slack (the request {outcome})")


def _refuse(action: Mapping[str, Any], why: str | None, *, message: str | None = None) -> dict[str, Any]:
    """`reject` (or, where only `respond` is allowed, `respond`): the tool never runs."""
    text = message or (f"Not approved: {why}." if why else None)
    if "reject" in action["allowed"]:
        return {"type": "reject", "message": text} if text else {"type": "reject"}
    if "respond" in action["allowed"]:
        return {"type": "respond", "message": text or "Not approved in Slack; the tool was not run."}
    raise SignoffError(f"{action['name']} was not approved, and its review config allows neither reject nor respond")


def _summary(action: Mapping[str, Any]) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in list(action["args"].items())[:3])
    return f"{action['name']}({args})"[:SUMMARY_MAX]


def _allowed_in_schema(schema: Mapping[str, Any]) -> list[str]:
    """Decision types a per-call `response_schema` accepts (a discriminated union, or one type)."""
    mapping = (schema.get("discriminator") or {}).get("mapping")
    if isinstance(mapping, Mapping):
        return list(mapping)
    const = ((schema.get("properties") or {}).get("type") or {}).get("const")
    return [const] if isinstance(const, str) else ["approve", "reject"]


def _args_schema(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """The tool's argument schema from a per-call `response_schema`'s edit branch, refs resolved one level."""
    defs = schema.get("$defs") or {}
    edited = defs.get("EditedAction") or {}
    ref = ((edited.get("properties") or {}).get("args") or {}).get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
        return None
    found = defs.get(ref.removeprefix("#/$defs/"))
    if not isinstance(found, Mapping) or found.get("type") != "object":
        return None
    return {**found, "$defs": dict(defs)} if "$ref" in str(found) else dict(found)
