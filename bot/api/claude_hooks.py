"""`POST /api/v1/hooks/claude-code`: Claude Code's hooks answered by the server itself.

Claude Code's HTTP hook (`"type": "http"`) POSTs the hook's JSON here, with the options in the URL
(`?wait=50&on_timeout=defer&channel=C1&approvers=U1,U2&risk=high`) and the agent's token in
`Authorization: Bearer $SIGNOFF_TOKEN` (listed in the hook's `allowedEnvVars`). `signoff hook
claude-code` (the command hook) forwards the same JSON, plus what it saw on the agent's machine.
The rules are `signoff.claude_hook`'s; this module is the edge: auth, submit, wait, answer.

Invariants:
- Every answer is 200 with a complete decision, errors included (a bad token, a bad body, a full
  server): Claude Code treats a non-2xx answer or a timeout as "no decision" and, unless the hook
  says `"onFailure": "block"`, lets the call through.
- Answers within `wait` seconds (keep it below the hook's `timeout`).
- Files named by the agent are never read here: previews show the proposed input, not a diff
  against this machine's disk, and a request has no `state` to bind the approval to (the file
  changed since the approval is the command hook's check: it is the side that sees the file). A
  command hook's answer carries the signed request it was decided on (`signoff`), which it checks.
- PostToolUse / PostToolUseFailure report what ran to the request the call's key names (the
  execution receipt); they never block anything: the answer is `{}`. A transcript is read only when the operator says the server runs
  beside the agents (SIGNOFF_CLAUDE_TRANSCRIPTS=read), and only a `<session_id>.jsonl`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from aiohttp import web

import signoff.claude_hook as rules
from bot.api import elicitations, owners
from bot.api.longpoll import LIMITS
from bot.api.routes import CLAUDE_HOOK_PATH, RATE, SERVICE, SETTINGS, _find_by_key, signed, submit_approval
from bot.api.schemas import ApprovalIn, load_object, validate
from bot.approvals.outcomes import OutcomeConflict, report_outcome
from bot.domain.json_codec import dumps
from bot.domain.model import Status
from bot.domain.outcomes import ERROR_MAX, PARAMS_MAX, RESULT_MAX, RanStatus, RunOutcome
from bot.domain.wire import decided_json, outcome_status, request_json
from bot.errors import IdempotencyMismatch, InvalidInput, SignoffError, TooManyPending
from bot.approvals.service import MAX_WAIT_SECONDS
from signoff.hook_state import chain_keys

log = logging.getLogger(__name__)



def _answer(result: dict[str, Any]) -> web.Response:
    return web.json_response(result, dumps=dumps)


def _suggestion_refused(exc: InvalidInput) -> bool:
    details = exc.details if isinstance(exc.details, list) else []
    return any(str(d.get("field", "")).split(".")[0] in ("suggestions", "session")
               for d in details if isinstance(d, dict))


def _readable(path: str | None, call: rules.HookCall) -> str | None:
    """The transcript's path if the server may read it: the operator said so (SIGNOFF_CLAUDE_TRANSCRIPTS),
    and it names this session's transcript (an absolute `<session_id>.jsonl`)."""
    if not path or not os.path.isabs(path) or os.path.basename(path) != f"{call.session_id}.jsonl":
        return None
    return path


def _pending_call_id(path: str, call: rules.HookCall) -> str | None:
    import signoff.claude_transcript as transcript

    return transcript.call_id_of(path, call.tool_name, call.tool_input)


def _calls_in_turn(path: str, call: rules.HookCall) -> int | None:
    import signoff.claude_transcript as transcript

    return transcript.calls_in_turn(path, call.tool_use_id)


async def claude_code_hook(request: web.Request) -> web.Response:
    event: str | None = None
    try:
        options = rules.options_from(request.query.items())
        data = load_object(await request.read())
        event = rules.event_of(data)
        if event in rules.POST_EVENTS:
            await _report(request, data)
            return _answer({})
        if event == rules.ELICITATION:  # an MCP server's form, asked in Slack (bot/api/elicitations.py)
            return _answer(await elicitations.hook(request, data, options, wait=_wait))
        call = rules.parse(data)
        return _answer(await _decide(request, call, options))
    except (SignoffError, ValueError) as exc:
        if event in rules.POST_EVENTS:  # the call already ran: nothing to block
            log.info("claude code hook: no receipt for a %s: %s", event, getattr(exc, "message", None) or exc)
            return _answer({})
        return _answer(rules.failed(event, getattr(exc, "message", None) or str(exc)))
    except Exception as exc:  # noqa: BLE001 - fail closed: an error is a deny, never an allow
        log.exception("claude code hook failed")
        if event in rules.POST_EVENTS:
            return _answer({})
        return _answer(rules.failed(event, f"the server failed ({type(exc).__name__})"))


async def _decide(request: web.Request, call: rules.HookCall, options: rules.Options) -> dict[str, Any]:
    import signoff.claude_suggestions as claude_suggestions
    import signoff.claude_tools as claude_tools

    request.app[RATE].take(owners.token_of(request).name)
    local = call.local
    transcript = (_readable(call.transcript_path, call)
                  if local is None and request.app[SETTINGS].claude_transcripts else None)
    call_id = local.call_id if local else None
    if transcript is not None and call.asking and not call.tool_use_id:
        call_id = await asyncio.to_thread(_pending_call_id, transcript, call)
    key = rules.chain_key(call, rules.call_key(call, call_id))
    preview = (local.preview if local and local.preview
               else claude_tools.preview(call.tool_name, call.tool_input, call.cwd, read_files=False))
    sent = [wire for _, wire in claude_suggestions.as_sent(list(call.suggestions))] if call.asking else []

    async def submit(offer: list[dict[str, Any]]) -> tuple[Any, bool]:
        body = rules.approval_body(call, options, preview=preview, host=local.host if local else None,
                                   suggestions=offer)
        # A call's first ask is the common case (a resumed or retried call is the exception): its key is
        # not looked up before the write, which finds a taken one anyway.
        return await submit_approval(request, validate(ApprovalIn, body), key, probe=False)

    try:
        try:
            found, created = await submit(sent)
        except InvalidInput as exc:
            if not sent or not _suggestion_refused(exc):
                raise
            sent = []  # a suggestion never costs the approval: ask without them
            found, created = await submit(sent)
    except (IdempotencyMismatch, TooManyPending):
        # Asked before with a different card (the file on disk changed since), or asked before and the
        # token is at its cap of pending requests: the call is the same, so the request made then is
        # the one to answer from.
        earlier = await _find_by_key(request, request.app[SERVICE], key)
        if earlier is None:
            raise
        found, created = earlier, False
    if found.is_pending and options.wait > 0:
        found = await _wait(request, found.id, options.wait)
    # A command hook checks the whole signed request; a call still pending is answered from its delivery and
    # timers; Claude Code's own HTTP hook, for a decided call, reads the decision alone.
    body = request_json(found) if local is not None or found.is_pending else decided_json(found)
    return _with_request(request, local, body, key, await _answer_for(call, options, body, sent, created, transcript))


def _with_request(request: web.Request, local: rules.Local | None, body: dict[str, Any], key: str,
                  result: dict[str, Any]) -> dict[str, Any]:
    """A command hook's answer also carries the signed request it was decided on and its key: the hook
    checks the signature, and the file, before it lets the call run (signoff.hook). Claude Code's own
    HTTP hook gets the answer alone."""
    if local is None:
        return result
    return {**result, rules.REPLY: {"request": signed(request, body), "key": key}}


async def _answer_for(call: rules.HookCall, options: rules.Options, body: dict[str, Any], sent: list[Any],
                      created: bool, transcript: str | None) -> dict[str, Any]:
    decided = rules.from_request(body)
    if decided is not None:
        return rules.shaped(decided, call.event, rules.accepted_suggestion(body, sent) if call.asking else None)
    from signoff._protocol import undeliverable

    nobody = undeliverable(body)
    if nobody is not None:  # nobody can see the card: deny now, saying why and how to fix it
        return rules.shaped(rules.deny(nobody.message), call.event)
    local = call.local
    calls_in_turn = local.calls_in_turn if local else None
    if transcript is not None and options.on_timeout == "defer" and created and not call.asking:
        # Read only now, for a call that might be deferred: most calls never need it.
        calls_in_turn = await asyncio.to_thread(_calls_in_turn, transcript, call)
    return rules.shaped(rules.no_decision(call, options, str(body["id"]), created=created,
                                          calls_in_turn=calls_in_turn), call.event)


async def _report(request: web.Request, data: dict[str, Any]) -> None:
    """PostToolUse / PostToolUseFailure: the execution receipt, on the request that let the call run
    (found by the call's key; a call asked again after its file changed, along that chain). A call
    Signoff never asked about is left alone."""
    ran = rules.parse_ran(data)
    if ran is None:
        return
    service = request.app[SERVICE]
    me = owners.token_of(request).name
    for key in chain_keys(ran.base_key):
        found = await _find_by_key(request, service, key)
        if found is None:
            return
        if outcome_status(found) == "skipped":  # approved on a file that changed: asked again
            continue
        if found.status is not Status.APPROVED or found.extra.get(owners.OWNER) != me:
            return
        params = ran.params if len(dumps(ran.params)) <= PARAMS_MAX else None
        result = ran.result if ran.result is None or len(dumps(ran.result)) <= RESULT_MAX else None
        report = RunOutcome(RanStatus(ran.status), ran.error[:ERROR_MAX], service.clock.now(), params, result, by=me)
        try:
            await report_outcome(service, found.id, report, item=None)
        except OutcomeConflict:
            log.info("claude code hook: %s already has another outcome; this one is not recorded", found.id)
        return


async def _wait(request: web.Request, request_id: str, seconds: float) -> Any:
    """The request once decided, or after `seconds`; the wait counts against the long-poll caps."""
    limits = request.app[LIMITS]
    token = request.headers.get("Authorization", "").partition(" ")[2].strip()  # as cap_long_polls counts
    refusal = limits.refusal(token)
    service = request.app[SERVICE]
    if refusal is not None:
        raise InvalidInput(refusal)
    limits.active[token] += 1
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            found = await service.wait(request_id, min(MAX_WAIT_SECONDS, max(0.0, deadline - loop.time())))
            if not found.is_pending or loop.time() >= deadline or service.waiters.closing:
                return found  # closing: the server stops; waiting again would return at once, in a loop
            from bot.domain.delivery_state import is_undelivered

            if is_undelivered(found):
                return found
    finally:
        limits.active[token] -= 1
        if not limits.active[token]:
            del limits.active[token]


def add_routes(app: web.Application) -> None:
    app.router.add_post(CLAUDE_HOOK_PATH, claude_code_hook)
