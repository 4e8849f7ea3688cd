"""What a paused Pydantic AI step is made of, and how Signoff's decisions answer its calls.

Shared by `signoff.pydantic_ai`'s handler, `pause` and `resume`; no I/O. Pydantic AI is imported only
where an answer is built (`ToolApproved` / `ToolDenied`).

- `step_key`: the Idempotency-Key of a step's request, from the run's conversation id and the calls'
  `tool_call_id`s (the same wherever it is computed: the handler, a retry, `pause`).
- `Paused`: the request(s) of a step, its calls and the message history, as JSON, for `resume`.
- `answers`: a decision as `DeferredToolResults.approvals` (an approval runs with the decision's
  parameters; anything else is a denial the model reads).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from signoff.errors import SignoffError
from signoff.models import Decision

if TYPE_CHECKING:
    from pydantic_ai.messages import ToolCallPart

KEY_MAX = 255  # the server's Idempotency-Key limit
CLAIM_KEY_MAX = 200  # the server's resume claim key limit
FORMAT = "signoff.pydantic_ai/1"


def step_key(conversation_id: str | None, call_ids: Sequence[str], kind: str = "ask") -> str:
    """The Idempotency-Key of the request for these calls of one run step (`kind`: "ask" for a person's
    card, "policy" for a call submitted alone because policy decides it)."""
    key = f"pydantic-ai:{kind}:{conversation_id or '-'}:{','.join(sorted(call_ids))}"
    if len(key) <= KEY_MAX:
        return key
    return f"pydantic-ai:{kind}:sha256:{hashlib.sha256(key.encode()).hexdigest()}"


def claim_key(request_ids: Sequence[str]) -> str:
    """The resume claim of a paused run: `pydantic-ai:<its request id(s)>` (a digest when long)."""
    key = f"pydantic-ai:{'+'.join(request_ids)}"
    return key if len(key) <= CLAIM_KEY_MAX else f"pydantic-ai:sha256:{hashlib.sha256(key.encode()).hexdigest()}"


@dataclass(frozen=True)
class PausedCall:
    """One call the paused step waits on: its id, tool and the arguments a person is shown."""

    id: str
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Asked:
    """One request of a paused step and the calls it decides, in order (a batch: one call per action)."""

    request_id: str
    call_ids: tuple[str, ...]


@dataclass(frozen=True)
class Paused:
    """A run that ended for a person to decide: its request(s), the calls and the message history, as JSON.

    Usually one request (one card, a batch card for several calls); one per call when policy puts a
    call at a tier a batch cannot carry (a quorum, typed confirmation, other approvers)."""

    asked: tuple[Asked, ...]
    calls: tuple[PausedCall, ...]
    history: list[Any] = field(repr=False)  # ModelMessagesTypeAdapter's JSON form
    conversation_id: str | None = None

    @property
    def request_ids(self) -> tuple[str, ...]:
        return tuple(a.request_id for a in self.asked)

    @property
    def request_id(self) -> str:
        """The request (the first, when the step needed several)."""
        return self.asked[0].request_id

    @property
    def claim_key(self) -> str:
        return claim_key(self.request_ids)

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, "conversation_id": self.conversation_id,
                           "asked": [{"request_id": a.request_id, "call_ids": list(a.call_ids)} for a in self.asked],
                           "calls": [{"id": c.id, "name": c.name, "args": c.args} for c in self.calls],
                           "history": self.history})

    @classmethod
    def from_json(cls, text: str | bytes) -> Paused:
        try:
            data = json.loads(text)
            if data.get("format") != FORMAT:
                raise ValueError(f"format is {data.get('format')!r}, not {FORMAT!r}")
            asked = tuple(Asked(str(a["request_id"]), tuple(str(i) for i in a["call_ids"])) for a in data["asked"])
            if not asked:
                raise ValueError("no request")
            return cls(asked, tuple(PausedCall(str(c["id"]), str(c["name"]), dict(c["args"])) for c in data["calls"]),
                       list(data["history"]), data.get("conversation_id"))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SignoffError(f"not a paused Pydantic AI run saved by signoff.pydantic_ai: {exc}") from None


def call_args(call: ToolCallPart, validated: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The arguments the tool would get (validated, defaults filled in), else as the model sent them."""
    found = validated.get(call.tool_call_id)
    return dict(found) if found is not None else call.args_as_dict()


def _denied_words(outcome: str | None, via: str | None, comment: str | None, who: str | None,
                  ended: Decision | None = None) -> str:
    """What the model reads for a call that must not run."""
    if outcome == "rejected":
        if via == "policy":
            return f"Signoff's policy does not allow this call: {comment or 'denied'}"
        if via == "reply" and comment:
            return comment  # "Reply instead": the person's answer stands in for the tool's
        return f"{who or 'A person'} rejected this call in Slack" + (f": {comment}" if comment else ".")
    if ended is not None and outcome is None:  # a batch that ended before this call was decided
        return _denied_words(ended.outcome, ended.via, ended.comment, ended.decider)
    why = f": {comment}" if comment else ""
    if outcome == "expired":
        return f"Nobody approved this call in Slack in time{why}. It did not run."
    if outcome == "cancelled":
        return f"The approval request was cancelled{why}. It did not run."
    return f"This call was not approved ({outcome}){why}. It did not run."


def answers(decision: Decision, call_ids: Sequence[str]) -> dict[str, Any]:
    """`DeferredToolResults.approvals` for `call_ids` from the decision of their request (a batch: in order)."""
    from pydantic_ai.tools import ToolApproved, ToolDenied

    found: dict[str, Any] = {}
    if decision.items:
        if len(decision.items) != len(call_ids):
            raise SignoffError(f"request {decision.request_id} has {len(decision.items)} actions, not the "
                               f"{len(call_ids)} calls it was made for", request_id=decision.request_id)
        for call_id, item in zip(call_ids, decision.items, strict=True):
            found[call_id] = (ToolApproved(override_args=dict(item.params)) if item.approved else
                              ToolDenied(_denied_words(item.outcome, item.via, item.comment, item.decider, decision)))
        return found
    if len(call_ids) != 1:
        raise SignoffError(f"request {decision.request_id} is one action, not {len(call_ids)} calls",
                           request_id=decision.request_id)
    found[call_ids[0]] = (ToolApproved(override_args=dict(decision.params)) if decision.approved else
                          ToolDenied(_denied_words(decision.outcome, decision.via, decision.comment, decision.decider)))
    return found


UNKNOWN = ("Not run again: this call was approved, but the process resuming it stopped before it could say "
           "whether the call ran. Its outcome is unknown; check before trying again.")


def not_again(approvals: Mapping[str, Any]) -> dict[str, Any]:
    """The answers of a resume taken over mid-run: an approved call may have run already, so it is not run
    again and the model is told its outcome is unknown (rejections stand as they are)."""
    from pydantic_ai.tools import ToolApproved, ToolDenied

    return {call_id: ToolDenied(UNKNOWN) if isinstance(answer, ToolApproved) else answer
            for call_id, answer in approvals.items()}


@dataclass(frozen=True)
class Approved:
    """A call a decision let run: the request (and batch item) its execution receipt goes to, and the
    parameters it was approved with."""

    request_id: str
    item: str | None
    params: dict[str, Any]


def approved_calls(decision: Decision, call_ids: Sequence[str]) -> dict[str, Approved]:
    """The calls of `call_ids` that `decision` approved (a batch: per action, in order)."""
    if decision.items:
        return {call_id: Approved(decision.request_id, item.key, dict(item.params))
                for call_id, item in zip(call_ids, decision.items, strict=False) if item.approved}
    if decision.approved and len(call_ids) == 1:
        return {call_ids[0]: Approved(decision.request_id, None, dict(decision.params))}
    return {}


OFFERED = ["approve", "edit", "reject", "respond"]  # "Reply instead": the model reads the reply, the tool does not run


def clean_schema(schema: Any) -> dict[str, Any] | None:
    """A tool's parameters JSON schema as the card's Edit form takes it (an object schema), else None."""
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return None
    return dict(schema)


def agent_schemas(agent: Any) -> dict[str, dict[str, Any]]:
    """Tool name -> its parameters JSON schema, for the function tools an agent holds (best effort)."""
    found: dict[str, dict[str, Any]] = {}
    for toolset in getattr(agent, "toolsets", None) or ():
        tools = getattr(toolset, "tools", None)
        if not isinstance(tools, Mapping):
            continue
        for name, tool in tools.items():
            schema = clean_schema(getattr(getattr(tool, "tool_def", None), "parameters_json_schema", None))
            if schema is not None:
                found[str(name)] = schema
    return found
