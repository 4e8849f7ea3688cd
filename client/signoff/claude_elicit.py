"""Claude Code's `Elicitation` hook (an MCP server asks the user for input): its input and answer.

Claude Code sends `mcp_server_name`, `message`, `mode` (`form` | `url`), `url`, `elicitation_id`
and `requested_schema` (besides the usual `session_id`, `cwd`, ...), and reads
`{"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept" | "decline" | "cancel",
"content": {...}}}`. Both hook kinds (the HTTP hook, and `signoff hook claude-code` forwarding to
it) are answered by the server from a Signoff question (bot/api/elicitations.py).

Invariants: input that is not an elicitation Claude Code sends is refused with a message naming
what is wrong (ValueError), and an answer is `accept` only when a person answered: every error is
`cancel`, with the reason in `systemMessage` (shown to the user). Standard library only: the
command hook imports this.
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

ELICITATION = "Elicitation"
ACTIONS = ("accept", "decline", "cancel")
KEY_MAX = 128


class Elicitation(NamedTuple):
    session_id: str
    server: str
    message: str
    mode: str
    requested_schema: dict[str, Any] | None = None
    url: str | None = None
    elicitation_id: str | None = None


def parse(data: object) -> Elicitation:
    """The elicitation in the hook's JSON; ValueError naming what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("the hook input is not what Claude Code sends (a JSON object is expected)")
    problems: list[str] = []

    def text(name: str, required: bool = True) -> str | None:
        value = data.get(name)
        if value is None and not required:
            return None
        if not isinstance(value, str) or (required and not value):
            problems.append(f"{name}: {'Field required' if value is None else 'must be a string'}")
            return None
        return value

    session_id, server, message = text("session_id"), text("mcp_server_name"), text("message")
    mode = data.get("mode", "form")
    url, elicitation_id = text("url", required=False), text("elicitation_id", required=False)
    schema = data.get("requested_schema")
    if mode not in ("form", "url"):
        problems.append(f"mode: must be form or url, not {str(mode)[:40]!r}")
    elif mode == "form" and not isinstance(schema, dict):
        problems.append("requested_schema: an object is required in form mode")
    elif mode == "url" and not url:
        problems.append("url: Field required in url mode")
    if problems:
        raise ValueError(f"the Elicitation hook input is not what Claude Code sends ({'; '.join(problems[:5])})")
    assert session_id and server and message is not None
    return Elicitation(session_id, server, message, str(mode), schema if mode == "form" else None,
                       url if mode == "url" else None, elicitation_id or None)


def key(found: Elicitation) -> str | None:
    """The idempotency key of an elicitation Claude Code names (`elicitation_id`); None: it asks anew."""
    if not found.elicitation_id:
        return None
    made = f"claude-code:elicitation:{found.session_id}:{found.elicitation_id}"
    return made if len(made) <= KEY_MAX else f"claude-code:elicitation:sha256:{hashlib.sha256(made.encode()).hexdigest()}"


def answer(action: str, content: dict[str, Any] | None = None, why: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"hookEventName": ELICITATION, "action": action}
    if action == "accept" and content is not None:
        out["content"] = content
    result: dict[str, Any] = {"hookSpecificOutput": out}
    if why:
        result["systemMessage"] = f"Signoff: {' '.join(why.split())[:500]}"
    return result


def checked(answered: object) -> dict[str, Any]:
    """The server's answer if it is a complete Elicitation answer; ValueError otherwise (never passed on)."""
    out = answered.get("hookSpecificOutput") if isinstance(answered, dict) else None
    if not isinstance(out, dict) or out.get("hookEventName") != ELICITATION or out.get("action") not in ACTIONS:
        raise ValueError("the Signoff server's answer is not an Elicitation answer")
    if out.get("action") == "accept" and "content" in out and not isinstance(out["content"], dict):
        raise ValueError("the Signoff server's answer has content that is not an object")
    assert isinstance(answered, dict)
    return answered
