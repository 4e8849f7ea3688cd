"""Claude Code's `Elicitation` hook (an MCP server asks the user for input): its input and answer.

Claude Code sends `mcp_server_name`, `message`, `mode` (`form` | `url`), `url`, `elicitation_id`
and `requested_schema` (besides the usual `session_id`, `cwd`, ...), and reads
`{"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept" | "decline" | "cancel",
"content": {...}}}`. Both hook kinds (the HTTP hook, and `signoff hook claude-code` forwarding to
it) are answered by the server from a Signoff question (bot/api/elicitations.py).

Invariants: input that is not an elicitation Claude Code sends is refused with a message naming
what is wrong (ValueError), and an answer is `accept` only when a person answered: every error is
`cancel`, with the reason in `systemMessage` (shown to the user). The command hook passes on only
an answer rebuilt from the signed question it was read from (`from_signed`, after signoff.hook has
checked the signature): that question must be the one asked, under this elicitation's key.
Standard library only: the command hook imports this.
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

ELICITATION = "Elicitation"
ACTIONS = ("accept", "decline", "cancel")
KEY_MAX = 128
MESSAGE_MAX = 2000  # what the server keeps of the message (bot.domain.elicitation.MESSAGE_MAX)
SERVER_MAX = 200
ENDED = {"answered": "accept", "rejected": "decline", "expired": "cancel", "cancelled": "cancel"}


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


def local_key(local: object) -> str | None:
    """The key a command hook made for an elicitation Claude Code gave no id (`signoff_local.key`)."""
    given = local.get("key") if isinstance(local, dict) else None
    return f"local-{given[:64]}" if isinstance(given, str) and given else None


def key(found: Elicitation, made_here: str | None = None) -> str | None:
    """The idempotency key of an elicitation: Claude Code's `elicitation_id`, else the key a command hook
    made (`local_key`); None: it asks anew."""
    named = found.elicitation_id or made_here
    if not named:
        return None
    made = f"claude-code:elicitation:{found.session_id}:{named}"
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


def from_signed(request: object, asked: Elicitation, why: str | None = None) -> dict[str, Any]:
    """The answer rebuilt from the signed question it was read from (its signature checked by the caller),
    never from the unsigned answer beside it; ValueError if the question is not the one asked, or not ended."""
    if not isinstance(request, dict):
        raise ValueError("the Signoff server's answer came without the signed question it was read from")
    action = _object(request.get("action"))
    params = _object(action.get("params"))
    same = (request.get("kind") == "question" and action.get("name") == "elicitation"
            and params.get("mode") == asked.mode and params.get("message") == asked.message[:MESSAGE_MAX]
            and params.get("server") == asked.server[:SERVER_MAX]
            and (params.get("requested_schema") == asked.requested_schema if asked.mode == "form"
                 else params.get("url") == asked.url))
    if not same:
        raise ValueError(f"the Signoff server answered from question {str(request.get('id'))[:40]}, which is not "
                         "the one this MCP server asked; nothing is passed on")
    action_taken = ENDED.get(str(request.get("status")))
    if action_taken is None:
        raise ValueError(f"question {str(request.get('id'))[:40]} has not ended; nothing is passed on")
    content = _object(_object(request.get("decision")).get("params")).get("content") if action_taken == "accept" else None
    return answer(action_taken, content if isinstance(content, dict) else None, why)


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
