"""Interrupts to Signoff requests, and Signoff decisions back to each interrupt's resume value.

Three kinds of interrupt are understood (anything else is not Signoff's and is left alone):
- `approval()` / `ask()` values (`{"signoff": {"request_id", "kind"}}`): the request exists; the
  resume value is the ended request's JSON, read back by the node.
- LangChain HumanInTheLoopMiddleware, batched (`{"action_requests", "review_configs"}`): one
  request per action, the card offering that action's `allowed_decisions`; resumed with
  `{"decisions": [...]}` in the actions' order, once every action is decided.
- The same middleware in `per_call` mode (`{"type": "tool_approval", ...}`): one request; resumed
  with one decision, keyed by the interrupt's id. Its `response_schema` says which decisions are
  allowed and, for edits, the tool's argument schema (it drives the Edit form).

Decisions map to LangChain's as its docs describe: approved unchanged -> `approve`; approved with
changes -> `edit` (`edited_action` = the tool name and the approved args); "Reply instead" ->
`respond` (the reply becomes the tool's result; the tool does not run); rejected -> `reject`
(with the reason as `message` when one was given). Expired or cancelled requests fail closed:
`reject`, saying nobody approved in time.

Several actions in one interrupt are, for now, one request each, submitted under one key prefix
(`submit_actions`); a batch card would replace only that function.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from signoff.errors import SignoffError, SignoffRequestError
from signoff.langgraph_keys import MARKER, interrupt_key
from signoff.models import final_decision

if TYPE_CHECKING:
    from signoff.client import SignoffClient

SUMMARY_MAX = 3000
CARD_OPTIONS = ("channel", "approvers", "risk", "requested_by", "timing")


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


def requests_for(client: SignoffClient, thread_id: str, interrupt: Any, card: Mapping[str, Any]) -> list[str] | None:
    """The request ids that answer `interrupt` (submitting them if needed), or None if it is not ours."""
    value = interrupt.value
    kind = kind_of(value)
    if kind is None:
        return None
    if kind == "signoff":
        return [str(value[MARKER]["request_id"])]
    prefix = interrupt_key("hitl", thread_id, interrupt.id, "")
    return submit_actions(client, prefix, actions_of(interrupt), card)


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


def submit_actions(client: SignoffClient, prefix: str, actions: Sequence[Mapping[str, Any]],
                   card: Mapping[str, Any]) -> list[str]:
    """One request per action, keyed `prefix` + its index: the one place a batch card would go."""
    ids = []
    for index, action in enumerate(actions):
        options = {k: v for k, v in card.items() if k in CARD_OPTIONS and v is not None}
        kwargs = dict(summary=_summary(action), context=action.get("description"),
                      idempotency_key=f"{prefix}{index}", allowed_decisions=action["allowed"], **options)
        schema = action.get("args_schema")
        try:
            submitted = client.submit(action["name"], action["args"], params_schema=schema, **kwargs)
        except SignoffRequestError as exc:
            if schema is None or exc.status != 400:
                raise
            # A tool schema Signoff cannot use for its form: ask without it (nothing was stored).
            submitted = client.submit(action["name"], action["args"], **kwargs)
        ids.append(submitted.id)
    return ids


def resume_value(interrupt: Any, bodies: Sequence[Mapping[str, Any]]) -> Any:
    """What to resume `interrupt` with, from its requests' ended JSON (in `requests_for` order)."""
    kind = kind_of(interrupt.value)
    if kind == "signoff":
        return dict(bodies[0])
    decisions = [to_langchain(action, body) for action, body in zip(actions_of(interrupt), bodies, strict=True)]
    return decisions[0] if kind == "per_call" else {"decisions": decisions}


def to_langchain(action: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
    """One LangChain HITL decision from an ended Signoff request, within the action's allowed decisions."""
    decision = final_decision(body)
    if decision is None:
        raise SignoffError(f"{body.get('id')} is still pending", request_id=str(body.get("id")))
    allowed = set(action["allowed"])
    if decision.outcome == "approved":
        if "approve" in allowed and decision.params == action["args"]:
            return {"type": "approve"}
        if "edit" in allowed:
            return {"type": "edit", "edited_action": {"name": action["name"], "args": decision.params}}
        return _refuse(action, "it was approved with changes, which this action does not allow")
    if decision.reply is not None and "respond" in allowed:
        return {"type": "respond", "message": decision.reply}
    if decision.outcome == "rejected":
        reason = decision.comment
        return _refuse(action, None) if not reason else _refuse(action, None, message=reason)
    return _refuse(action, f"nobody approved it in Slack (the request {decision.outcome})")


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
