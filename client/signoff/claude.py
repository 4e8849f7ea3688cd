"""The Claude Agent SDK's permission callback, answered in Slack.

    from claude_agent_sdk import ClaudeAgentOptions
    from signoff.claude import can_use_tool

    options = ClaudeAgentOptions(can_use_tool=can_use_tool(channel="C0123ABCD"))

Every tool call that reaches "ask" in the SDK's permission chain becomes a card (title, description
and the reason Claude Code gives, from the SDK's context); Approve answers `PermissionResultAllow`
with the person's (possibly edited) input, Reject `PermissionResultDeny` with their reason.
The context's permission `suggestions` ride along: the card offers each usable one as "Approve &
always allow ...", and the one a person accepts (a Signoff grant from then on) is returned as
`updated_permissions=[that suggestion]`, so Claude Code remembers it as well.
`AskUserQuestion` calls become Signoff questions and come back as the answers the SDK expects.
Fails closed: any error (server down, expiry, a bug) is a deny with a reason, never an allow.
`claude_agent_sdk` is imported lazily (optional extra `signoff[claude]`).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import signoff.claude_suggestions as suggestions
import signoff.claude_tools as claude_tools
from signoff.client import AsyncSignoffClient
from signoff.errors import Rejected, SignoffError, SignoffRequestError
from signoff.models import Decision

Callback = Callable[[str, dict[str, Any], Any], Awaitable[Any]]


def _card_context(context: Any, session: str, cwd: str | None) -> str:
    lines = [getattr(context, "description", None), getattr(context, "decision_reason", None)]
    blocked = getattr(context, "blocked_path", None)
    if blocked:
        lines.append(f"Outside the allowed directories: {blocked}")
    agent = getattr(context, "agent_id", None)
    where = f"Claude Agent SDK session {session} in {cwd or os.getcwd()} on host {socket.gethostname()}"
    lines.append(where + (f" (sub-agent {agent})." if agent else "."))
    return "\n".join(line for line in lines if line)


def answers_for(questions: list[dict[str, Any]], answers: Any) -> dict[str, str]:
    """AskUserQuestion's `answers`: question text -> chosen label(s) joined with ", ", or the free text."""
    out: dict[str, str] = {}
    for question in questions:
        text = str(question.get("question"))
        if text in answers:
            out[text] = answers[text].value
    return out


def can_use_tool(client: AsyncSignoffClient | None = None, *, channel: str | None = None,
                 approvers: Sequence[str] | None = None, risk: str | None = None, timeout: float | None = None,
                 session: str | None = None, cwd: str | None = None) -> Callback:
    """A `can_use_tool` callback that asks in Slack. `session` names this agent run on the cards and in the
    idempotency keys (default: a new id per callback), so asking twice for one `tool_use_id` makes one card."""
    from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

    run = session or uuid.uuid4().hex[:12]
    state: dict[str, AsyncSignoffClient] = {}

    def signoff() -> AsyncSignoffClient:
        if client is not None:
            return client
        if "client" not in state:
            state["client"] = AsyncSignoffClient()
        return state["client"]

    async def callback(tool_name: str, tool_input: dict[str, Any], context: Any) -> Any:
        call_id = getattr(context, "tool_use_id", None) or uuid.uuid4().hex
        key = f"claude-sdk:{run}:{call_id}"
        try:
            if tool_name == "AskUserQuestion":
                questions = list(tool_input.get("questions") or [])
                answers = await signoff().ask(
                    questions, summary="Claude has a question", channel=channel, approvers=approvers,
                    context=_card_context(context, run, cwd), timeout=timeout, idempotency_key=key,
                    requested_by=f"Claude Agent SDK on {socket.gethostname()}")
                return PermissionResultAllow(updated_input={**tool_input, "questions": questions,
                                                            "answers": answers_for(questions, answers)})
            sent = suggestions.as_sent(getattr(context, "suggestions", None))

            async def request(offer: list[tuple[Any, dict[str, Any]]], session: str | None) -> Decision:
                return await signoff().request_approval(
                    tool_name, tool_input,
                    summary=getattr(context, "title", None) or claude_tools.summary(tool_name, tool_input, cwd),
                    preview=claude_tools.preview(tool_name, tool_input, cwd),
                    params_schema=claude_tools.input_schema(tool_name, tool_input), risk=risk, channel=channel,
                    approvers=approvers, timeout=timeout, idempotency_key=key,
                    context=_card_context(context, run, cwd),
                    requested_by=f"Claude Agent SDK on {socket.gethostname()}",
                    suggestions=[wire for _, wire in offer] or None, session=session)

            try:
                decision = await request(sent, run)
            except SignoffRequestError as exc:
                if not suggestions.refused(exc):
                    raise
                sent = []  # a suggestion never costs the approval: ask without them (an older server)
                decision = await request(sent, None)
            chosen = suggestions.accepted(decision, sent)
            # The accepted suggestion goes back to Claude Code as the SDK's own PermissionUpdate, so
            # Claude remembers it too (in its session or settings file, as the suggestion said).
            return PermissionResultAllow(updated_input=decision.params,
                                         updated_permissions=[chosen] if chosen is not None else None)
        except Rejected as exc:
            because = f": {exc.reason}" if exc.reason else " (no reason given)"
            via = exc.decision.via if exc.decision else None
            by = f"by Signoff's {via}" if via in ("policy", "grant") or not exc.by else f"in Slack by {exc.by}"
            return PermissionResultDeny(message=f"Rejected {by}{because}")
        except SignoffError as exc:
            return PermissionResultDeny(message=f"Signoff: no approval ({exc.message})")
        except Exception as exc:  # noqa: BLE001 - fail closed: an error is never an allow
            return PermissionResultDeny(message=f"Signoff: could not get a decision ({type(exc).__name__}: {exc})")

    return callback
