"""What the model reads: API messages from the log, tool results, decisions and errors as text.

Pure functions (plus `run_tool`, which runs a tool and turns any failure into a result).
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bot.domain.questions import answer_text
from bot.agent.tools import Tool, ToolContext, ToolError
from bot.domain.model import Actor, Decision, Kind, Outcome, Request, Via
from bot.domain.runs import ExecStatus, RunMessage, ToolExecution

if TYPE_CHECKING:  # importing the SDK takes ~2 s: `import_sdk` does it on first use, or in the background
    import anthropic

log = logging.getLogger(__name__)

UNKNOWN_OUTCOME = (
    "The outcome of this tool call is unknown: Signoff restarted while it was running, and the tool "
    "is not safe to repeat, so it was not run again. It may or may not have taken effect. Check before "
    "trying it again, or ask a person."
)


def normalise(content: Any) -> list[dict[str, Any]]:
    """The assistant's content as plain blocks the API accepts back (empty text dropped)."""
    out: list[dict[str, Any]] = []
    for block in content:
        data = block if isinstance(block, dict) else block.model_dump(mode="json", exclude_none=True)
        kind = data.get("type")
        if kind == "text":
            if data.get("text"):
                out.append({"type": "text", "text": data["text"]})
        elif kind == "tool_use":
            out.append({"type": "tool_use", "id": data["id"], "name": data["name"], "input": data.get("input") or {}})
        elif kind in ("thinking", "redacted_thinking"):
            out.append(data)
    return out


def to_api_messages(history: list[RunMessage]) -> list[dict[str, Any]]:
    """Rows -> Messages API messages: consecutive rows of one role become one message."""
    messages: list[dict[str, Any]] = []
    for row in history:
        content = row.content if isinstance(row.content, list) else [{"type": "text", "text": str(row.content)}]
        if messages and messages[-1]["role"] == row.role:
            messages[-1]["content"].extend(content)
        else:
            messages.append({"role": row.role, "content": list(content)})
    return messages


def intervention_text(user_name: str | None, user_id: str, text: str) -> str:
    who = f"{user_name} (Slack user {user_id})" if user_name else f"Slack user {user_id}"
    return f"[Message from {who} in the run's Slack thread]\n{text}"


def who(actor: Actor | None) -> str:
    if actor is None:
        return "a person"
    return f"{actor.name} (Slack user {actor.id})" if actor.name else f"Slack user {actor.id}"


def decided_execution(execution: ToolExecution, request: Request | None) -> ToolExecution:
    """What a decision on the call's request means for the call."""
    finished = execution.evolve(status=ExecStatus.FINISHED, is_error=True)
    if request is None:
        return finished.evolve(result="Not run: its approval request no longer exists.")
    if request.items and request.decision is not None:  # one item of a batch card: its own outcome
        request = item_request(request, execution.tool_use_id)
    decision = request.decision
    if request.kind is Kind.QUESTION:
        if decision is not None and decision.outcome is Outcome.ANSWERED:
            return finished.evolve(is_error=False, result=answer_text(request))
        return finished.evolve(result=f"Nobody answered: the question was {request.status.value}.")
    if decision is not None and decision.outcome is Outcome.APPROVED:
        note = f"Approved by {_by(decision)}."
        if decision.changes:
            edits = "; ".join(f"{c.field}: {_json(c.before)} -> {_json(c.after)}" for c in decision.changes)
            note += (f" Before approving, the person changed the parameters: {edits}. "
                     "The tool ran with the changed parameters.")
        return execution.evolve(status=ExecStatus.READY, final_input=decision.params, note=note)
    if decision is not None and decision.outcome is Outcome.REJECTED:
        reason = decision.comment.strip() if decision.comment else ""
        return finished.evolve(result=f"Rejected by {_by(decision)}; the tool was not run. "
                                      + (f"Reason: {reason}" if reason else "No reason was given."))
    if request.status.value == "expired":
        return finished.evolve(result="Not run: nobody approved this call in time (the request expired).")
    return finished.evolve(result="Not run: the approval request was cancelled.")


def _by(decision: Decision) -> str:
    """Who decided: a person, or Signoff's policy / a standing grant (issue 12)."""
    if decision.decided_by is None and decision.via is Via.POLICY:
        return "Signoff's policy"
    if decision.decided_by is None and decision.via is Via.GRANT:
        return "a standing grant"
    return who(decision.decided_by)


def item_request(request: Request, tool_use_id: str) -> Request:
    """A decided batch request as if it were the request of the one call `tool_use_id`."""
    decision = request.decision
    assert decision is not None
    item = next((i for i in request.items if i.key == tool_use_id), None)
    if item is None or item.outcome is None:  # expired or cancelled before this item was decided
        return request.evolve(items=())
    return request.evolve(items=(), decision=replace(
        decision, outcome=item.outcome, params=item.final_params, changes=item.changes,
        comment=item.comment or decision.comment,  # the action's own reason, else the batch's
        decided_by=item.decided_by or decision.decided_by, items=()))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def output_text(result: Any) -> str:
    """The tool's own output in a stored result (without the note on who approved it)."""
    if isinstance(result, list):
        texts = [str(b.get("text", "")) for b in result if isinstance(b, dict)]
        return texts[-1] if texts else ""
    return "" if result is None else str(result)


async def run_tool(tool: Tool, ctx: ToolContext, params: dict[str, Any]) -> tuple[str, bool]:
    """(result text, is_error) of running `tool`; a failure is a result the model can read."""
    try:
        return await tool.run(ctx, params), False
    except ToolError as exc:
        return str(exc) or "the tool failed", True
    except TimeoutError:
        if tool.idempotent:
            return f"the tool did not finish within {tool.timeout:g} seconds and was stopped (it is safe to retry)", True
        # A call that was stopped may still have landed (the POST went out, the answer did not come).
        return (f"The outcome of this tool call is unknown: it did not finish within {tool.timeout:g} seconds "
                "and was stopped. It may or may not have taken effect. Check before trying it again, or ask "
                "a person."), True
    except Exception as exc:  # a tool bug must not kill the run: the model hears about it
        log.exception("tool %s failed", tool.name)
        return internal_error_text(exc, "the tool failed"), True


def internal_error_text(exc: BaseException, what: str) -> str:
    """What the model and the thread are told about an unexpected error: its kind, never its text
    (which can carry SQL, parameters or secrets); the full error goes to the server log."""
    return f"{what} with an internal error ({type(exc).__name__}); the details are in Signoff's log"


def import_sdk() -> Any:
    import anthropic

    return anthropic


def model_error(exc: anthropic.APIError) -> str:
    """One clear line about a failed model call."""
    anthropic = import_sdk()
    if isinstance(exc, anthropic.APIStatusError):
        kind = getattr(exc, "type", None) or "error"
        detail = getattr(exc, "api_message", None) or str(exc)
        retried = " (after the client's retries)" if exc.status_code in (408, 409, 429) or exc.status_code >= 500 else ""
        return f"The model API answered {exc.status_code} {kind}{retried}: {detail}"
    if isinstance(exc, anthropic.APITimeoutError):
        return "The model API did not answer in time (after the client's retries)."
    if isinstance(exc, anthropic.APIConnectionError):
        return f"Could not reach the model API (after the client's retries): {exc}"
    return f"The model call failed: {exc}"
