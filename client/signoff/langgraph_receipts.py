"""What ran after a resumer answered LangChain HumanInTheLoopMiddleware interrupts: execution receipts.

The middleware pauses before the tool calls of one model turn; the resumer answers it, and the graph
runs the approved (or edited) calls as `ToolMessage`s. Each approved action is matched to its tool call
in the turn that paused (same tool, same proposed arguments, in order) and, once the resume returned,
to that call's `ToolMessage`: `status` "success" is reported `ran` (with the approved parameters and the
message's content, shortened), "error" `failed` (the content is the error). An action that was not
approved, or whose call left no `ToolMessage` (the run stopped first), reports nothing.

`approval()` interrupts are not reported here: the node that asked runs the action itself and is the
one that knows what it did (`client.report_outcome(decision.request_id, ...)`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from signoff.langgraph_hitl import actions_of, kind_of
from signoff.models import final_decision


@dataclass(frozen=True)
class Receipt:
    request_id: str
    item: str | None
    params: dict[str, Any]
    call_id: str


def _messages(state: Any) -> list[Any]:
    values = getattr(state, "values", None)
    found = values.get("messages") if isinstance(values, Mapping) else None
    return list(found) if isinstance(found, list) else []


def pending_calls(state: Any) -> list[dict[str, Any]]:
    """The tool calls of the last model turn of a paused thread (what its HITL interrupt is about)."""
    for message in reversed(_messages(state)):
        calls = getattr(message, "tool_calls", None)
        if calls:
            return [dict(c) for c in calls]
    return []


def approved_actions(parts: Sequence[tuple[Any, Sequence[str]]], bodies: Mapping[str, Any],
                     calls: Sequence[Mapping[str, Any]]) -> list[Receipt]:
    """The HITL actions a person approved, each with the tool call it stands for."""
    unused = [c for c in calls if c.get("id")]
    found: list[Receipt] = []
    for interrupt, request_ids in parts:
        if kind_of(interrupt.value) not in ("batched", "per_call"):
            continue
        actions = actions_of(interrupt)
        decisions = [final_decision(bodies[r]) for r in request_ids]
        for index, action in enumerate(actions):
            if len(decisions) == 1 and decisions[0] is not None and decisions[0].items:
                item = decisions[0].items[index] if index < len(decisions[0].items) else None
                approved = item is not None and item.approved
                rid, key, params = decisions[0].request_id, item.key if item else None, item.params if item else {}
            else:
                one = decisions[index] if index < len(decisions) else None
                approved = one is not None and one.approved
                rid, key, params = (one.request_id if one else ""), None, (one.params if one else {})
            match = next((c for c in unused if c.get("name") == action["name"] and c.get("args") == action["args"]),
                         None)
            if match is None:
                continue
            unused.remove(match)
            if approved:
                found.append(Receipt(rid, key, dict(params), str(match["id"])))
    return found


def what_ran(receipts: Sequence[Receipt], state: Any) -> list[tuple[Receipt, str, Any]]:
    """(receipt, "ran" | "failed", the ToolMessage's content) for each approved call that left one."""
    results = {str(getattr(m, "tool_call_id", "")): m for m in _messages(state)
               if getattr(m, "type", None) == "tool" and getattr(m, "tool_call_id", None)}
    found = []
    for receipt in receipts:
        message = results.get(receipt.call_id)
        if message is not None:
            found.append((receipt, "failed" if getattr(message, "status", None) == "error" else "ran",
                          _tool_response(getattr(message, "content", None))))
    return found


EDITED_NOTE, RESPONSE = "Note: a human reviewer", "\n\nTool response:\n"


def _tool_response(content: Any) -> Any:
    """The tool's own answer: an edited call's message is prefixed by the middleware's note to the model."""
    if isinstance(content, str) and content.startswith(EDITED_NOTE) and RESPONSE in content:
        return content.split(RESPONSE, 1)[1]
    return content
