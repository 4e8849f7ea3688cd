"""`signoff hook claude-code`: Claude Code's PreToolUse (or PermissionRequest) hook, answered by a
person in Slack.

Reads the hook's JSON on stdin, prints the hook's decision JSON on stdout, and ALWAYS exits 0.

Invariants:
- Fails closed. The CLI ignores a hook that crashes, exits 1 or prints non-JSON and lets the call
  through, so every error (server down, bad token, bad input, a bug) becomes a printed `deny`
  with a reason.
- One request per `session_id` + `tool_use_id` (the idempotency key): asking again for the same
  call, including `claude -p --resume` after a `defer`, finds the same request and answers from its
  stored decision. An approval is for one call: a call whose id is unknown (no `tool_use_id`, and for
  a PermissionRequest not exactly one open call like it in the transcript) gets a request of its
  own, every time, and is never deferred.
- The transcript is read bounded (`signoff.claude_transcript`): a regular file only, its tail only,
  within a time limit; one that cannot be read counts as "cannot tell", which asks and never defers.
- Never loses a call: `defer` is answered only for a call asked for the first time in a turn with
  one tool call. The real CLI loses a call deferred again on resume, and all but the last deferred
  call of a turn with several; those get a `deny` saying the request is still waiting instead.
- Answers within `--wait` seconds (keep it below the hook's `timeout` in settings.json: a hook that
  times out does not block the call). A card Slack refused for good is a deny at once, naming why;
  the waiting is the client's, paced by `signoff._pace`.
- As a PermissionRequest hook (`signoff.hook_permission`) it answers in that event's shape, sends
  Claude's `permission_suggestions` with the request, and returns the one a person accepted
  ("Approve & always allow ...") in `updatedPermissions`. It never defers there.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict, Field, ValidationError

import signoff.claude_suggestions as suggestions
import signoff.claude_transcript as claude_transcript
import signoff.claude_tools as claude_tools
import signoff.hook_outcome as hook_outcome
import signoff.hook_state as hook_state
from signoff.client import SignoffClient, Submission
from signoff.hook_permission import EVENT as PERMISSION_REQUEST
from signoff.hook_permission import as_permission_request, event_of
from signoff.errors import SignoffRequestError, UndeliverableError
from signoff.models import Decision

DEFAULT_WAIT = 50.0
KEY_MAX = 128
ONCE = "once-"  # a call without an id: its key's call part is this and a random id, never derived again
STILL_WAITING = "still waiting for a decision"


class HookInput(BaseModel):
    """What Claude Code sends a PreToolUse hook (unknown newer fields are ignored)."""

    model_config = ConfigDict(extra="ignore")
    session_id: str = Field(min_length=1)
    tool_name: str = Field(min_length=1)
    tool_input: dict[str, Any]
    tool_use_id: str | None = None
    transcript_path: str | None = None
    cwd: str | None = None
    permission_mode: str | None = None
    hook_event_name: str | None = None
    permission_suggestions: list[Any] | None = None  # PermissionRequest only
    tool_response: Any = None  # PostToolUse only
    error: Any = None  # PostToolUseFailure only


@dataclass(frozen=True)
class Options:
    wait: float = DEFAULT_WAIT
    on_timeout: str = "deny"
    channel: str | None = None
    approvers: tuple[str, ...] = ()
    risk: str | None = None
    url: str | None = None
    token: str | None = None


def answer(decision: str, reason: str, updated_input: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"hookEventName": "PreToolUse", "permissionDecision": decision,
                           "permissionDecisionReason": reason}
    if updated_input is not None:
        out["updatedInput"] = updated_input
    return {"hookSpecificOutput": out}


def deny(reason: str) -> dict[str, Any]:
    return answer("deny", f"Signoff: {reason}")


def from_decision(decision: Decision) -> dict[str, Any]:
    """allow with the person's (possibly edited) input, or deny with their reason."""
    who = decision.decider
    by = f"by Signoff's {decision.via}" if decision.via in ("policy", "grant") or not who else f"in Slack by {who}"
    if decision.outcome == "approved":
        edited = decision.edits_words
        return answer("allow", f"Approved {by}{edited} ({decision.request_id})", decision.params)
    if decision.outcome == "rejected":
        because = f": {decision.comment}" if decision.comment else " (no reason given)"
        return deny(f"rejected {by}{because}")
    return deny(f"the request was {decision.outcome}{': ' + decision.comment if decision.comment else ''}")


def request_key(session_id: str, tool_use_id: str) -> str:
    """The idempotency key of a tool call's request: `signoff wait --claude-result` derives it again.

    Hashed when long, never cut (a cut key could be another call's); short enough that the server's
    per-token prefix still fits its 255 characters.
    """
    key = f"claude-code:{session_id}:{tool_use_id}"
    return key if len(key) <= KEY_MAX else f"claude-code:sha256:{hashlib.sha256(key.encode()).hexdigest()}"


def call_key(hook: HookInput, asking: bool) -> str:
    """The key of this call's request. Only a call id makes a key that a later invocation derives again
    (a retry, `claude -p --resume`): without one, whatever else the call shares with another call (its
    tool and input) would answer it from that call's approval. So no id means a key of its own: it asks.
    """
    call_id = hook.tool_use_id or (
        claude_transcript.pending_call_id(claude_transcript.read(hook.transcript_path), hook.tool_name,
                                          hook.tool_input) if asking else None)
    return request_key(hook.session_id, call_id or f"{ONCE}{uuid.uuid4().hex}")


def context_line(hook: HookInput) -> str:
    parts = [f"Claude Code session {hook.session_id}", f"in {hook.cwd or '(unknown directory)'}",
             f"on host {socket.gethostname()}"]
    if hook.permission_mode:
        parts.append(f"(permission mode {hook.permission_mode})")
    return " ".join(parts) + "."


def decide(hook: HookInput, options: Options) -> dict[str, Any]:
    """The hook's answer for one tool call. Raises on errors; `run` turns those into a deny."""
    asking = hook.hook_event_name == PERMISSION_REQUEST
    sent = suggestions.as_sent(hook.permission_suggestions) if asking else []

    def finish(result: dict[str, Any], found: Decision | None = None) -> dict[str, Any]:
        if not asking:
            return result
        chosen = suggestions.accepted(found, sent) if found is not None else None
        return as_permission_request(result, chosen)

    started = time.monotonic()
    base_key = call_key(hook, asking)
    with SignoffClient(options.url, options.token, retry_for=min(10.0, max(1.0, options.wait / 4))) as client:
        def submit(key: str, tool_input: dict[str, Any], state: str | None, note: str, changed: str,
                   offer: list[tuple[Any, dict[str, Any]]], session: str | None) -> Submission:
            return client.submit(
                hook.tool_name, tool_input,
                summary=claude_tools.summary(hook.tool_name, tool_input, hook.cwd) + changed,
                preview=claude_tools.preview(hook.tool_name, tool_input, hook.cwd),
                params_schema=claude_tools.input_schema(hook.tool_name, tool_input), risk=options.risk,
                channel=options.channel, approvers=options.approvers or None, idempotency_key=key,
                context=context_line(hook) + note, requested_by=f"Claude Code on {socket.gethostname()}",
                suggestions=[wire for _, wire in offer] or None, session=session, state=state)

        def ask(key: str, tool_input: dict[str, Any], note: str, changed: str) -> Submission:
            nonlocal sent
            # Read before the preview is made: a change in between makes the approval look stale (asks again),
            # never current.
            state = claude_tools.file_state(hook.tool_name, tool_input, hook.cwd)
            try:
                try:
                    return submit(key, tool_input, state, note, changed, sent, hook.session_id)
                except SignoffRequestError as exc:
                    if not suggestions.refused(exc):
                        raise
                    sent = []  # a suggestion never costs the approval: ask without them (an older server)
                    return submit(key, tool_input, state, note, changed, sent, None)
            except SignoffRequestError as exc:
                # Asked before with a different card (the file on disk changed since, another host resumed):
                # the call is the same, so the request made then is the one to answer from.
                earlier = client.find(key) if exc.error_code == "idempotency_key_reused" else None
                if earlier is None:
                    raise
                return Submission(str(earlier["id"]), earlier, False, client)

        proposed, note, changed = hook.tool_input, "", ""
        found: Decision | None = None
        for key in hook_state.chain_keys(base_key):
            handle = ask(key, proposed, note, changed)
            try:
                found = handle.decision or client.decision(handle.id,
                                                           max(0.0, options.wait - (time.monotonic() - started)))
            except UndeliverableError as exc:  # nobody can see the card: deny now, saying why and how to fix it
                return finish(deny(exc.message))
            if found is None or not found.approved:
                break
            # Bound to the state it was approved on (signoff.hook_state): the file as it is now, or ask again.
            if hook_state.still_current(found.state, claude_tools.file_state(hook.tool_name, found.params, hook.cwd)):
                break
            client.report_quietly(found.request_id, "skipped", error=hook_state.CHANGED)
            proposed, note, changed = found.params, hook_state.changed_context(found.request_id), hook_state.CHANGED_SUMMARY
        else:
            return finish(deny(f"the file changed after each of {hook_state.MAX_ASKS} approvals; nothing was written"))
    if found is not None:
        return finish(from_decision(found), found)
    open_note = f"no decision in Slack within {options.wait:g}s; request {handle.id} is {STILL_WAITING}"
    if options.on_timeout == "ask":
        return finish(answer("ask", f"Signoff: {open_note}"))
    if options.on_timeout == "defer" and asking:
        return finish(deny(f"{open_note} (a PermissionRequest hook cannot defer a call; use --on-timeout defer "
                           "with a PreToolUse hook)"))
    if options.on_timeout == "defer":
        if note:  # asked again because the file changed: the call was answered before, deferring would lose it
            return deny(f"{open_note}; the file changed since it was approved, so it was asked again, and this call "
                        f"is denied (deferring it again would lose it): wait with `signoff wait {handle.id}`")
        if not handle.created:
            # Asked before (a resumed session): deferring again would lose the call.
            return deny(f"{open_note}; the session was resumed before anyone decided, so this call is denied "
                        f"(deferring it again would lose it): wait with `signoff wait {handle.id}` before resuming")
        calls = claude_transcript.tool_calls_in_turn(claude_transcript.read(hook.transcript_path), hook.tool_use_id)
        if calls != 1:
            # With several calls in one turn the CLI keeps only the last deferred one.
            many = "several tool calls in this turn" if calls else "cannot tell how many tool calls this turn has"
            return deny(f"{open_note} ({many}, so it cannot be deferred)")
        return answer("defer", f"Signoff: waiting for a decision in Slack on {handle.id}; "
                               f"run `signoff wait {handle.id}` then `claude -p --resume {hook.session_id}`")
    return finish(deny(open_note))


def after(hook: HookInput, options: Options) -> dict[str, Any]:
    """PostToolUse / PostToolUseFailure: report what ran to the request that allowed it (signoff.hook_outcome)."""
    if not hook.tool_use_id:
        return {}
    failed = hook.hook_event_name == hook_outcome.POST_FAILURE
    with SignoffClient(options.url, options.token, retry_for=min(10.0, max(1.0, options.wait / 4))) as client:
        hook_outcome.report(client, request_key(hook.session_id, hook.tool_use_id), hook.tool_input, failed=failed,
                            response=hook.tool_response, error=str(hook.error) if hook.error is not None else None)
    return {}


def run(argv: Sequence[str], stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> int:
    """The whole hook: never raises, always prints one JSON answer, always returns 0."""
    event: str | None = None
    try:
        options = parse_options(argv)
        raw = stdin.read()
        event = event_of(raw)
        try:
            hook = HookInput.model_validate_json(raw)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
                                 for e in exc.errors(include_url=False)[:5])
            raise ValueError(f"the hook input is not what Claude Code sends ({problems})") from None
        result = after(hook, options) if event in hook_outcome.EVENTS else decide(hook, options)
    except BaseException as exc:  # noqa: BLE001 - fail closed on anything, even SystemExit from argparse
        if event in hook_outcome.EVENTS:  # the call already ran: nothing to close; the receipt is lost, said so
            print(f"signoff: could not report the outcome: {type(exc).__name__}: {exc}"[:600], file=sys.stderr)
            result = {}
        elif isinstance(exc, KeyboardInterrupt):
            result = deny("interrupted before a decision")
        else:
            detail = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            result = deny(f"could not get a decision ({type(exc).__name__}: {' '.join(str(detail).split())[:500]})")
        if event == PERMISSION_REQUEST:  # an error's deny, in the shape that event's answer takes
            result = as_permission_request(result)
    stdout.write(json.dumps(result) + "\n")
    stdout.flush()
    return 0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # raise instead of exit 2: the caller prints a deny
        raise ValueError(f"bad hook options: {message}")


def parse_options(argv: Sequence[str]) -> Options:
    parser = _Parser(prog="signoff hook claude-code", add_help=False)
    parser.add_argument("--wait", type=float, default=DEFAULT_WAIT)
    parser.add_argument("--on-timeout", choices=["deny", "ask", "defer"], default="deny")
    parser.add_argument("--channel", default=os.environ.get("SIGNOFF_CHANNEL") or None)
    parser.add_argument("--approvers", default=os.environ.get("SIGNOFF_APPROVERS", ""))
    parser.add_argument("--risk", choices=["low", "medium", "high", "critical"], default=None,
                        help="ask for at least this risk (default: the policy's tier for the tool; high without a policy file)")
    parser.add_argument("--url")
    parser.add_argument("--token")
    args = parser.parse_args(list(argv))
    if args.wait < 0:
        raise ValueError("--wait must be 0 or more seconds")
    approvers = tuple(a.strip() for a in args.approvers.replace(" ", ",").split(",") if a.strip())
    return Options(args.wait, args.on_timeout, args.channel, approvers, args.risk, args.url, args.token)


HELP = """signoff hook claude-code [--wait SECONDS] [--on-timeout deny|ask|defer] [--channel C...]
                         [--approvers U1,U2,S3] [--risk high] [--url URL] [--token TOKEN]
Claude Code PreToolUse or PermissionRequest hook: reads the hook JSON on stdin, prints the decision
JSON, exits 0. As a PermissionRequest hook, Claude's permission suggestions are offered on the card.
As a PostToolUse (and PostToolUseFailure) hook it reports what ran to the request that allowed it.
SIGNOFF_URL, SIGNOFF_TOKEN, SIGNOFF_CHANNEL and SIGNOFF_APPROVERS are read from the environment."""
