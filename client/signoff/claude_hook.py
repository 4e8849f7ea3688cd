"""Claude Code's hooks answered by Signoff: the rules both hook kinds share, in one place.

Two ways in, one set of rules:
- the HTTP hook (`"type": "http"`): Claude Code POSTs the hook's JSON to the server's
  `POST /api/v1/hooks/claude-code?wait=50&on_timeout=defer&channel=C...` (bot/api/claude_hooks.py);
- the command hook (`signoff hook claude-code`, signoff.hook): a small process beside the agent
  that adds what only that machine can see (`signoff_local`: the diff against the file on disk,
  the transcript's count of tool calls in the turn, the id of a PermissionRequest's call) and
  forwards the same JSON to the same endpoint.

The server decides both with the functions below. Standard library only, and no I/O: the command
hook imports this module on every tool call, and must start fast.

Invariants (kept by `no_decision` and `call_key`):
- One request per `session_id` + `tool_use_id` (the idempotency key): asking again for the same
  call, including `claude -p --resume` after a `defer`, finds the same request and answers from its
  stored decision. A call whose id is unknown gets a request of its own, every time, and is never
  deferred.
- Never loses a call: `defer` is answered only for a call asked for the first time in a turn known
  to hold one tool call. The real CLI loses a call deferred again on resume, and all but the last
  deferred call of a turn with several; those get a `deny` saying the request is still waiting.
- Every answer is a complete decision (the caller turns any error into `deny`): a hook fails open
  on anything else unless `"onFailure": "block"`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

PRE_TOOL_USE = "PreToolUse"
PERMISSION_REQUEST = "PermissionRequest"
ELICITATION = "Elicitation"
POST_TOOL_USE = "PostToolUse"  # the execution receipt: what ran, reported to the request that allowed it
POST_TOOL_USE_FAILURE = "PostToolUseFailure"
POST_EVENTS = (POST_TOOL_USE, POST_TOOL_USE_FAILURE)
EVENTS = (PRE_TOOL_USE, PERMISSION_REQUEST, ELICITATION, *POST_EVENTS)
REPLY = "signoff"  # in the endpoint's answer to a command hook: the signed request it was decided on
_KEPT = 200  # a tool response's short string fields kept in a receipt's result (not a file's whole content)
ERROR_MAX = 1000
DEFAULT_WAIT = 50.0
MAX_WAIT = 600.0  # Claude Code's own cap on a hook's timeout
ON_TIMEOUT = ("deny", "ask", "defer")
RISKS = ("low", "medium", "high", "critical")
KEY_MAX = 128
ONCE = "once-"  # a call without an id: its key's call part is this and a random id, never derived again
STILL_WAITING = "still waiting for a decision"
LOCAL = "signoff_local"  # what the command hook adds to the hook's JSON


class Local(NamedTuple):
    """What a command hook running beside the agent saw there (the server cannot see that machine).

    These only ever lower what the call gets (a preview to look at, a deny instead of a defer):
    `calls_in_turn` and `call_id` are the agent's own word about its own call."""

    preview: dict[str, Any] | None = None
    calls_in_turn: int | None = None
    call_id: str | None = None
    host: str | None = None
    state: str | None = None  # what the preview was computed from (the file's sha256): signoff.hook_state
    again: int = 0  # asked again after the file changed since an approval: the call's n-th ask (its chain key)
    changed_from: str | None = None  # the request approved on the file as it was


class HookCall(NamedTuple):
    """A PreToolUse or PermissionRequest hook's input (unknown newer fields are ignored)."""

    session_id: str
    tool_name: str
    tool_input: dict[str, Any]
    event: str = PRE_TOOL_USE
    tool_use_id: str | None = None
    transcript_path: str | None = None
    cwd: str | None = None
    permission_mode: str | None = None
    suggestions: tuple[Any, ...] = ()  # PermissionRequest's permission_suggestions
    local: Local | None = None

    @property
    def asking(self) -> bool:
        """A PermissionRequest: Claude Code would ask; it cannot defer."""
        return self.event == PERMISSION_REQUEST


class Options(NamedTuple):
    """The hook's options: the command's flags, or the HTTP hook URL's query."""

    wait: float = DEFAULT_WAIT
    on_timeout: str = "deny"
    channel: str | None = None
    approvers: tuple[str, ...] = ()
    risk: str | None = None  # asked-for risk: only ever raises the policy's tier (None: the policy's)


def _text(data: Mapping[str, Any], name: str, problems: list[str], *, required: bool = False) -> str | None:
    value = data.get(name)
    if value is None:
        if required:
            problems.append(f"{name}: Field required")
        return None
    if not isinstance(value, str) or (required and not value):
        problems.append(f"{name}: {'a non-empty string is required' if required else 'must be a string'}")
        return None
    return value


def event_of(data: object) -> str | None:
    """The `hook_event_name` of hook input, read leniently (to shape even an error's answer)."""
    name = data.get("hook_event_name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None


def parse(data: object) -> HookCall:
    """The hook call in Claude Code's JSON; ValueError naming what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("the hook input is not what Claude Code sends (a JSON object is expected)")
    problems: list[str] = []
    session_id = _text(data, "session_id", problems, required=True)
    tool_name = _text(data, "tool_name", problems, required=True)
    tool_input = data.get("tool_input")
    if not isinstance(tool_input, dict):
        problems.append("tool_input: Field required" if tool_input is None else "tool_input: an object is required")
    tool_use_id, transcript_path, cwd, mode = (_text(data, name, problems) for name in (
        "tool_use_id", "transcript_path", "cwd", "permission_mode"))
    if problems:
        raise ValueError(f"the hook input is not what Claude Code sends ({'; '.join(problems[:5])})")
    event = event_of(data) or PRE_TOOL_USE
    if event not in (PRE_TOOL_USE, PERMISSION_REQUEST):
        raise ValueError(f"this hook answers PreToolUse and PermissionRequest, not {event}")
    raw_suggestions = data.get("permission_suggestions")
    assert session_id and tool_name and isinstance(tool_input, dict)
    return HookCall(session_id=session_id, tool_name=tool_name, tool_input=tool_input, event=event,
                    tool_use_id=tool_use_id or None, transcript_path=transcript_path, cwd=cwd, permission_mode=mode,
                    suggestions=tuple(raw_suggestions) if isinstance(raw_suggestions, list) else (),
                    local=_local(data.get(LOCAL)))


def _local(raw: object) -> Local | None:
    if not isinstance(raw, dict):
        return None
    from signoff.hook_state import MAX_ASKS

    preview, calls, call_id, host, state, again, changed_from = (raw.get(k) for k in (
        "preview", "calls_in_turn", "call_id", "host", "state", "again", "changed_from"))
    return Local(preview if isinstance(preview, dict) else None,
                 calls if isinstance(calls, int) and not isinstance(calls, bool) else None,
                 call_id if isinstance(call_id, str) and call_id else None,
                 host[:200] if isinstance(host, str) and host else None,
                 state[:200] if isinstance(state, str) and state else None,
                 again if isinstance(again, int) and not isinstance(again, bool) and 0 <= again < MAX_ASKS else 0,
                 changed_from[:100] if isinstance(changed_from, str) and changed_from else None)


def _number(raw: str, name: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, not {raw[:40]!r}") from None
    if not 0 <= value <= MAX_WAIT:
        raise ValueError(f"{name} must be 0 to {MAX_WAIT:g} seconds")
    return value


def approvers_of(raw: str) -> tuple[str, ...]:
    return tuple(a.strip() for a in raw.replace(" ", ",").split(",") if a.strip())


def options_from(pairs: Iterable[tuple[str, str]]) -> Options:
    """The options an HTTP hook's URL carries (`?wait=50&on_timeout=defer&channel=C1&approvers=U1,U2`)."""
    known = {"wait", "on_timeout", "channel", "approvers", "risk"}
    query: dict[str, str] = {}
    for name, value in pairs:
        if name not in known:
            raise ValueError(f"unknown hook option {name!r} (known: {', '.join(sorted(known))})")
        if name in query:
            raise ValueError(f"the hook option {name!r} is given twice")
        query[name] = value
    on_timeout = query.get("on_timeout", "deny")
    if on_timeout not in ON_TIMEOUT:
        raise ValueError(f"on_timeout must be one of {', '.join(ON_TIMEOUT)}")
    risk = query.get("risk")
    if risk is not None and risk not in RISKS:
        raise ValueError(f"risk must be one of {', '.join(RISKS)}")
    return Options(wait=_number(query["wait"], "wait") if "wait" in query else DEFAULT_WAIT, on_timeout=on_timeout,
                   channel=query.get("channel") or None, approvers=approvers_of(query.get("approvers", "")),
                   risk=risk)


def request_key(session_id: str, tool_use_id: str) -> str:
    """The idempotency key of a tool call's request: `signoff wait --claude-result` derives it again.

    Hashed when long, never cut (a cut key could be another call's); short enough that the server's
    per-token prefix still fits its 255 characters.
    """
    key = f"claude-code:{session_id}:{tool_use_id}"
    return key if len(key) <= KEY_MAX else f"claude-code:sha256:{hashlib.sha256(key.encode()).hexdigest()}"


def call_key(call: HookCall, found_call_id: str | None = None) -> str:
    """The key of this call's request. Only a call id makes a key that a later invocation derives again
    (a retry, `claude -p --resume`): without one, whatever else the call shares with another call (its
    tool and input) would answer it from that call's approval. So no id means a key of its own: it asks.
    `found_call_id`: a PermissionRequest's call, found in the transcript (it carries no tool_use_id).
    """
    call_id = call.tool_use_id or (found_call_id if call.asking else None)
    # uuid4's randomness without `uuid`, which imports `platform` at the hook's start.
    return request_key(call.session_id, call_id or f"{ONCE}{os.urandom(16).hex()}")


def context_line(call: HookCall, host: str | None) -> str:
    parts = [f"Claude Code session {call.session_id}", f"in {call.cwd or '(unknown directory)'}"]
    if host:
        parts.append(f"on host {host}")
    if call.permission_mode:
        parts.append(f"(permission mode {call.permission_mode})")
    return " ".join(parts) + "."


def approval_body(call: HookCall, options: Options, *, preview: dict[str, Any], host: str | None,
                  suggestions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The agent API's approval body for this call (`POST /api/v1/approvals` takes the same). The `state`
    and the "changed since you approved" wording come from a command hook (`call.local`): only the side
    that sees the file can say what the preview was computed from."""
    import signoff.claude_tools as claude_tools
    import signoff.hook_state as hook_state

    body: dict[str, Any] = {
        "action": {"name": call.tool_name, "params": call.tool_input,
                   "params_schema": claude_tools.input_schema(call.tool_name, call.tool_input)},
        "summary": claude_tools.summary(call.tool_name, call.tool_input, call.cwd),
        "preview": preview, "context": context_line(call, host),
        "requested_by": f"Claude Code on {host}" if host else "Claude Code",
    }
    local = call.local
    if local is not None and local.state:
        body["state"] = local.state
    if local is not None and local.again:
        body["summary"] += hook_state.CHANGED_SUMMARY
        body["context"] += hook_state.changed_context(local.changed_from or "the earlier request")
    if options.risk:
        body["risk"] = options.risk
    if body["action"]["params_schema"] is None:
        del body["action"]["params_schema"]
    if options.channel:
        body["channel"] = options.channel
    if options.approvers:
        body["approvers"] = list(options.approvers)
    if suggestions:
        body["suggestions"] = list(suggestions)
        body["session"] = call.session_id
    return body


def answer(decision: str, reason: str, updated_input: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"hookEventName": PRE_TOOL_USE, "permissionDecision": decision,
                           "permissionDecisionReason": reason}
    if updated_input is not None:
        out["updatedInput"] = updated_input
    return {"hookSpecificOutput": out}


def deny(reason: str) -> dict[str, Any]:
    return answer("deny", f"Signoff: {reason}")


def shaped(pre_tool_use: dict[str, Any], event: str | None, accepted: dict[str, Any] | None = None) -> dict[str, Any]:
    """A PreToolUse-shaped answer in the shape of the event it answers."""
    if event == PERMISSION_REQUEST:
        from signoff.hook_permission import as_permission_request

        return as_permission_request(pre_tool_use, accepted)
    if event == ELICITATION:  # only errors reach here: the form is not answered (signoff.claude_elicit)
        from signoff.claude_elicit import answer as elicit_answer

        reason = pre_tool_use.get("hookSpecificOutput", {}).get("permissionDecisionReason")
        return elicit_answer("cancel", why=str(reason).removeprefix("Signoff: ") if reason else None)
    return pre_tool_use


def failed(event: str | None, why: str) -> dict[str, Any]:
    """The answer when no decision could be had: a deny saying why, in the event's shape."""
    return shaped(deny(f"could not get a decision ({' '.join(why.split())[:500]})"), event)


def from_request(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """allow with the person's (possibly edited) input, or deny with their reason; None while pending."""
    status = body.get("status")
    if status in (None, "pending"):
        return None
    decision = body.get("decision") if isinstance(body.get("decision"), dict) else {}
    assert isinstance(decision, dict)
    who_raw = decision.get("decided_by")
    who = (who_raw.get("name") or who_raw.get("id")) if isinstance(who_raw, dict) else None
    via = decision.get("via")
    by = f"by Signoff's {via}" if via in ("policy", "grant") or not who else f"in Slack by {who}"
    outcome = decision.get("outcome") or status
    comment = decision.get("comment")
    if outcome == "approved":
        changes = [str(c.get("field")) for c in decision.get("changes") or [] if isinstance(c, dict)]
        edited = f" with edits to {', '.join(changes)}" if changes else ""
        return answer("allow", f"Approved {by}{edited} ({body.get('id')})", dict(decision.get("params") or {}))
    if outcome == "rejected":
        because = f": {comment}" if comment else " (no reason given)"
        return deny(f"rejected {by}{because}")
    return deny(f"the request was {outcome}{': ' + comment if comment else ''}")


def accepted_suggestion(body: Mapping[str, Any], sent: Sequence[Any]) -> Any | None:
    """The suggestion (as Claude Code sent it) a person accepted with "Approve & always allow", or None."""
    decision = body.get("decision")
    found = decision.get("suggestion") if isinstance(decision, dict) else None
    if body.get("status") != "approved" or not isinstance(found, dict) or not isinstance(found.get("update"), dict):
        return None
    index = found.get("index")
    if isinstance(index, int) and 0 <= index < len(sent) and sent[index] == found["update"]:
        return sent[index]
    return None


def no_decision(call: HookCall, options: Options, request_id: str, *, created: bool,
                calls_in_turn: int | None) -> dict[str, Any]:
    """The answer (PreToolUse-shaped) when nobody decided within `options.wait`."""
    # Rounded: the command hook asks for what is left of its own wait (2.99504 s), a person reads "3s".
    waited = f"{round(options.wait)}" if options.wait >= 10 else f"{options.wait:.2g}"
    open_note = f"no decision in Slack within {waited}s; request {request_id} is {STILL_WAITING}"
    again = call.local is not None and call.local.again > 0
    if options.on_timeout == "defer" and again and not call.asking:
        # Asked again because the file changed: the call was answered before, deferring would lose it.
        return deny(f"{open_note}; the file changed since it was approved, so it was asked again, and this call "
                    f"is denied (deferring it again would lose it): wait with `signoff wait {request_id}`")
    if options.on_timeout == "ask":
        return answer("ask", f"Signoff: {open_note}")
    if options.on_timeout == "defer" and call.asking:
        return deny(f"{open_note} (a PermissionRequest hook cannot defer a call; use on_timeout defer "
                    "with a PreToolUse hook)")
    if options.on_timeout == "defer":
        if not created:
            # Asked before (a resumed session): deferring again would lose the call.
            return deny(f"{open_note}; the session was resumed before anyone decided, so this call is denied "
                        f"(deferring it again would lose it): wait with `signoff wait {request_id}` before resuming")
        if calls_in_turn != 1:
            # With several calls in one turn the CLI keeps only the last deferred one.
            many = "several tool calls in this turn" if calls_in_turn else "cannot tell how many tool calls this turn has"
            return deny(f"{open_note} ({many}, so it cannot be deferred)")
        return answer("defer", f"Signoff: waiting for a decision in Slack on {request_id}; "
                               f"run `signoff wait {request_id}` then `claude -p --resume {call.session_id}`")
    return deny(open_note)


def chain_key(call: HookCall, base_key: str) -> str:
    """The key of this ask of the call: the base key, or its n-th key when asked again (signoff.hook_state)."""
    from signoff.hook_state import chain_keys

    n = call.local.again if call.local is not None else 0
    return list(chain_keys(base_key))[n]


def result_of(response: Any) -> Any:
    """A short result from a tool's response: its small scalar fields (a Write's whole content is not
    repeated: the card's preview showed it), or its text cut short."""
    if isinstance(response, dict):
        kept = {k: v for k, v in response.items()
                if isinstance(v, (bool, int, float)) or (isinstance(v, str) and len(v) <= _KEPT)}
        return kept or None
    if isinstance(response, str):
        return response[:_KEPT * 5]
    return response


class Ran(NamedTuple):
    """A PostToolUse / PostToolUseFailure hook's input: what ran, for the request that allowed it."""

    base_key: str
    status: str  # "ran" or "failed"
    params: dict[str, Any]
    result: Any = None
    error: str = ""


def parse_ran(data: object) -> Ran | None:
    """The receipt in a PostToolUse(Failure) hook's input; None for a call that cannot be matched (no
    `tool_use_id`: the PreToolUse hook's key cannot be derived again)."""
    if not isinstance(data, dict):
        raise ValueError("the hook input is not what Claude Code sends (a JSON object is expected)")
    session_id, tool_use_id, tool_input = data.get("session_id"), data.get("tool_use_id"), data.get("tool_input")
    if not isinstance(session_id, str) or not session_id or not isinstance(tool_use_id, str) or not tool_use_id:
        return None
    params = tool_input if isinstance(tool_input, dict) else {}
    if event_of(data) == POST_TOOL_USE_FAILURE:
        error = data.get("error")
        text = " ".join(str(error if error is not None else "the tool call failed").split())[:ERROR_MAX]
        return Ran(request_key(session_id, tool_use_id), "failed", params, None, text or "the tool call failed")
    return Ran(request_key(session_id, tool_use_id), "ran", params, result_of(data.get("tool_response")))
