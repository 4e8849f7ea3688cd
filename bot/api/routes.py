"""The agent API under /api/v1 (bearer-token auth), plus the JSON error middleware."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from aiohttp import web

from bot.api import owners
from bot.api.duties_in import parse_duties
import signoff.claude_hook as claude_hook
from bot.api.schemas import ApprovalIn, CancelIn, OutcomeIn, body_hash, load_object, parse_body
from bot.api.suggestions_in import suggestion_extra
from bot.api.rate import SubmitRate
from bot.api.tokens import bearer, matching
from bot.api.timing_in import expand_groups, parse_timing
from bot.api.validation import ParamsChecker, check_body
from bot.domain.choices import EXTRA_KEY
from bot.domain.outcomes import STATE_KEY, RanStatus, RunOutcome
from bot.approvals.outcomes import report_outcome
from bot.domain.json_codec import dumps
from bot.domain.model import Request, Status, iso
from bot.domain.timing import Timing
from bot.outbox.egress import EgressPolicy, EgressRefused, check_url
from bot.errors import Forbidden, Gone, InvalidInput, NotFound, SignoffError
from bot.approvals.gate import policy_gate
from bot.approvals.keys import Signer
from bot.approvals.retention import Archive
from bot.approvals.service import ApprovalSpec, Service
from bot.domain.wire import outcome_status, request_json
from bot.process.settings import Settings

log = logging.getLogger(__name__)

MAX_LIST = 200
OUTCOME_FILTERS = ("not_reported", "ran", "failed", "skipped", "unknown")
MAX_SCAN_PAGES = 20
SERVICE = web.AppKey("service", Service)
SETTINGS = web.AppKey("settings", Settings)
CHECKER = web.AppKey("params_checker", ParamsChecker)
RATE = web.AppKey("submit_rate", SubmitRate)
CLAUDE_HOOK_PATH = "/api/v1/hooks/claude-code"  # bot/api/claude_hooks.py
SIGNER = web.AppKey("signer", Signer)
ARCHIVE = web.AppKey("archive", Archive)  # requests retention archived: a GET of one answers 410

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(status: int, code: str, message: str, **extra: Any) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message, **extra}}, status=status)


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """API errors as JSON bodies that name the problem (never an HTML error page)."""
    if "%00" in request.raw_path and request.path.startswith(("/api/", "/mcp")):
        # No id, key or filter holds U+0000 (PostgreSQL cannot even compare one): refused before any lookup.
        return error_response(400, "invalid_request", "the URL contains a NUL byte (%00)")
    try:
        return await handler(request)
    except SignoffError as exc:
        response = web.json_response(exc.to_json(), status=exc.status)
        if exc.retry_after is not None:
            response.headers["Retry-After"] = str(exc.retry_after)
        return response
    except web.HTTPRequestEntityTooLarge:
        # aiohttp's exception does not keep the limit; the request does.
        limit = request.client_max_size
        return error_response(413, "body_too_large", f"request body is larger than {limit} bytes")
    except web.HTTPException as exc:
        if not request.path.startswith("/api/") or exc.status < 400:
            raise
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status, "http_error")
        return error_response(exc.status, code, exc.reason)


@web.middleware
async def bearer_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not request.path.startswith("/api/"):
        return await handler(request)
    tokens = request.app[SETTINGS].api_token_specs
    presented = bearer(request.headers.get("Authorization"))
    matches = [tokens[i] for i in matching(presented, [t.secret for t in tokens])]
    if not matches:
        if request.path == CLAUDE_HOOK_PATH:  # a hook lets the call through on a 401 unless told to block
            problem = ("the Signoff server does not know the hook's bearer token" if presented is not None
                       else "the hook's call carried no bearer token")
            return await claude_hook_refused(
                request, f"{problem}: the HTTP hook needs \"headers\": "
                         f"{{\"Authorization\": \"Bearer $SIGNOFF_TOKEN\"}} and \"allowedEnvVars\": "
                         f"[\"SIGNOFF_TOKEN\"], with SIGNOFF_TOKEN one of the server's SIGNOFF_API_TOKENS",
                from_command_hook=f"{problem}: set SIGNOFF_TOKEN (or pass --token) to one of the server's "
                                  f"SIGNOFF_API_TOKENS")
        response = error_response(401, "unauthorized", "missing or invalid bearer token (Authorization: Bearer ...)")
        response.headers["WWW-Authenticate"] = 'Bearer realm="signoff"'
        return response
    request[owners.TOKEN] = matches[0]
    return await handler(request)


async def claude_hook_refused(request: web.Request, why: str, *, from_command_hook: str | None = None) -> web.Response:
    """A deny, with 200, for a Claude Code hook call the server will not take: blocked even where
    the hook fails open (bot/api/claude_hooks.py). `from_command_hook`: what `signoff hook` is told
    instead (its JSON carries what it saw locally), when its fix differs from the HTTP hook's."""
    body: dict[str, Any] | None
    try:
        body = load_object(await request.read())
        event = claude_hook.event_of(body)
    except (SignoffError, web.HTTPException):
        body, event = None, None
    if from_command_hook is not None and body is not None and claude_hook.LOCAL in body:
        why = from_command_hook
    return web.json_response(claude_hook.failed(event, why), dumps=dumps)


async def create_approval(request: web.Request) -> web.Response:
    request.app[RATE].take(owners.token_of(request).name)  # before reading the body: a flood costs nothing
    raw = await request.read()
    body: ApprovalIn = parse_body(ApprovalIn, raw)
    created_request, created = await submit_approval(request, body, idempotency_key(request))
    response = web.json_response(signed(request, request_json(created_request)), status=201 if created else 200,
                                 dumps=dumps)
    response.headers["Location"] = f"/api/v1/approvals/{created_request.id}"
    return response


async def submit_approval(request: web.Request, body: ApprovalIn, given_key: str | None, *,
                          probe: bool = True) -> tuple[Request, bool]:
    """Submit a validated approval body for the calling token (the rate is the caller's to take):
    (request, created). Shared by `POST /api/v1/approvals` and the Claude Code hook endpoint;
    `probe`: Service.submit's."""
    service = request.app[SERVICE]
    await check_body(request.app[CHECKER], body, who=owners.token_of(request).name,
                     budget_ms=request.app[SETTINGS].validation_budget_ms)
    channel = channel_or_default(request, body.channel)
    await check_callback(request, body.callback_url)
    key = owners.scoped_key(request, given_key)
    timing = parse_timing(body.reminders, body.escalation, body.timeout, risk=body.risk,
                          defaults=service.default_timing or Timing())
    members = await expand_groups(service.directory, body.approvers, timing,
                                  escalation_given=body.escalation is not None)
    duties = parse_duties(body, members, policy=policy_gate(service) is not None)
    spec = ApprovalSpec(
        quorum=duties.quorum,
        requester_user=duties.requester_user,
        requester_may_approve=duties.requester_may_approve,
        confirm=duties.confirm,
        items=body.domain_items(),
        timing=timing,
        approver_users=members,
        action=body.domain_action(),
        summary=body.summary,
        risk=body.risk,
        asked_risk=body.risk if "risk" in body.model_fields_set else None,  # only ever raises policy's tier
        channel=channel,
        context=body.context,
        preview=body.domain_preview(),
        approvers=tuple(dict.fromkeys(body.approvers)),
        callback_url=body.callback_url,
        requested_by=body.requested_by,
        extra={**owners.stamp(request),
               **({EXTRA_KEY: list(body.allowed_decisions)} if body.allowed_decisions is not None else {}),
               **suggestion_extra(body.suggestions, body.session),
               **({STATE_KEY: body.state} if body.state is not None else {})},
        timing_given=frozenset(name for name in ("reminders", "escalation", "timeout")
                               if getattr(body, name) is not None),
    )
    # The body's hash is what a key is bound to: without a key nothing ever compares it (not computed).
    return await service.submit(spec, idempotency_key=key, body_hash=body_hash(body) if key is not None else None,
                                probe=probe)


async def get_approval(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    wait = float_param(request, "wait", default=0.0, low=0.0, high=60.0)
    request_id = request.match_info["id"]
    # Checked on the first read, before any waiting: a long-poll is never held for someone else's request.
    try:
        found = await service.wait(request_id, wait, check=lambda read: owned(request, read))
    except NotFound:
        archived = await request.app[ARCHIVE].find(request_id)
        if archived is not None and owners.may_see(request, archived.owner):
            raise Gone(archived.words()) from None
        raise
    return web.json_response(signed(request, request_json(found)), dumps=dumps)  # the agents' hot path: orjson writes it


def signed(request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
    """`body` (a request's JSON) with the server's signature over its decision once it has ended."""
    return request.app[SIGNER].sign(body)


def owned(request: web.Request, found: Any) -> Any:
    """`found` if the calling token may see it, else the same 404 as for an unknown id."""
    owners.check(request, found.extra.get(owners.OWNER), "request", found.id)
    return found


async def list_approvals(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    if "idempotency_key" in request.query:
        # The request an agent submitted under a key it can derive again (e.g. a Claude Code session + tool call).
        found = await _find_by_key(request, service, request.query["idempotency_key"])
        return web.json_response({"items": [signed(request, request_json(found))] if found else [], "next_cursor": None})
    raw_status = request.query.get("status")
    try:
        status = Status(raw_status) if raw_status else None
    except ValueError:
        raise InvalidInput(f"status must be one of: {', '.join(s.value for s in Status)}") from None
    limit = int(float_param(request, "limit", default=50, low=1, high=MAX_LIST))
    after = _decode_cursor(request.query.get("cursor"))
    ran = request.query.get("outcome")  # e.g. not_reported: approvals nobody said what ran for (issue 37)
    if ran is not None and ran not in OUTCOME_FILTERS:
        raise InvalidInput(f"outcome must be one of: {', '.join(OUTCOME_FILTERS)}")
    items = await _visible(request, service, status=status, limit=limit + 1, after=after,
                           keep=None if ran is None else (lambda r: outcome_status(r) == ran))
    page, more = items[:limit], len(items) > limit
    next_cursor = _encode_cursor(page[-1].created_at, page[-1].id) if more and page else None
    return web.json_response({"items": [signed(request, request_json(r)) for r in page], "next_cursor": next_cursor})


async def _find_by_key(request: web.Request, service: Service, given: str) -> Any:
    """The request the calling token submitted under Idempotency-Key `given`, or None.

    The key is scoped exactly as submit scopes it (`owners.scoped_key`): an agent token's `k` is
    stored as `<token name>:k`, so it finds its own request and never another token's. An admin
    token's keys are stored as given: it finds its own by the key it sent, and an agent token's by
    the stored form `<token name>:<key>`. A request the token may not see is not there (as for get).
    """
    if not 1 <= len(given) <= 255:
        raise InvalidInput("idempotency_key must be 1 to 255 characters",
                           details=[{"field": "idempotency_key", "message": "1 to 255 characters"}])
    key = owners.scoped_key(request, given)
    assert key is not None
    found = await service.find_by_idempotency_key(key)
    if found is None or not owners.may_see(request, found.extra.get(owners.OWNER)):
        return None
    return found


async def cancel_approval(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    body: CancelIn = parse_body(CancelIn, await request.read())
    owned(request, await service.get(request.match_info["id"]))
    result = await service.cancel(request.match_info["id"], reason=body.reason)
    payload = signed(request, request_json(result.request))
    if not result.won:
        # The request sits beside the error (not inside it): the agent reads the winner's decision there.
        message = f"request is already {result.request.status.value}"
        return web.json_response({"error": {"code": "not_pending", "message": message}, "request": payload},
                                 status=409)
    return web.json_response(payload)


MAX_OUTCOME_BODY = 64 * 1024


async def report_approval_outcome(request: web.Request) -> web.Response:
    """POST /api/v1/approvals/{id}/outcome: what ran after the approval (an execution receipt).

    Only the token that owns the request; once per request (or batch item): the same report again is
    a 200 with what was recorded, a different one a 409 (`outcome_already_reported`)."""
    service = request.app[SERVICE]
    if request.content_length is not None and request.content_length > MAX_OUTCOME_BODY:
        raise InvalidInput(f"an outcome body is at most {MAX_OUTCOME_BODY // 1024} KB")
    raw = await request.content.read(MAX_OUTCOME_BODY + 1)
    if len(raw) > MAX_OUTCOME_BODY:
        raise InvalidInput(f"an outcome body is at most {MAX_OUTCOME_BODY // 1024} KB")
    body: OutcomeIn = parse_body(OutcomeIn, raw)
    found = owned(request, await service.get(request.match_info["id"]))
    if found.extra.get(owners.OWNER) != owners.token_of(request).name:  # an admin token sees it, did not run it
        raise Forbidden("only the token that submitted a request reports what ran")
    error = " ".join((body.error or "").split())
    report = RunOutcome(RanStatus(body.status), error, service.clock.now(), body.params, body.result,
                        by=owners.token_of(request).name)
    reported = await report_outcome(service, request.match_info["id"], report, item=body.item)
    return web.json_response(request_json(reported.request), status=201 if reported.created else 200, dumps=dumps)


async def redeliver_webhook(request: web.Request) -> web.Response:
    """POST /api/v1/approvals/{id}/redeliver: the decision's webhook again, for a receiver that lost it."""
    owned(request, await request.app[SERVICE].get(request.match_info["id"]))
    delivery = await request.app[SERVICE].redeliver(request.match_info["id"])
    return web.json_response({"delivery": delivery}, status=202)


async def _visible(request: web.Request, service: Service, *, status: Status | None, limit: int,
                   after: tuple[datetime, str] | None, keep: Callable[[Any], bool] | None = None) -> list[Any]:
    """A page of the requests this token may see (an agent token: its own) and `keep` keeps, in the usual order."""
    if owners.token_of(request).admin and keep is None:
        return await service.list(status=status, limit=limit, after=after)
    seen: list[Any] = []
    for _ in range(MAX_SCAN_PAGES):  # bounded: a token that owns few of many requests gets shorter pages
        batch = await service.list(status=status, limit=MAX_LIST, after=after)
        seen += [r for r in batch if owners.may_see(request, r.extra.get(owners.OWNER)) and (keep is None or keep(r))]
        if len(seen) >= limit or len(batch) < MAX_LIST:
            break
        after = (batch[-1].created_at, batch[-1].id)
    return seen[:limit]


def channel_or_default(request: web.Request, channel: str | None) -> str:
    """The body's channel, else SIGNOFF_DEFAULT_CHANNEL; neither is a 400."""
    chosen = channel or request.app[SETTINGS].default_channel
    if chosen is None:
        raise InvalidInput("channel is required (or set SIGNOFF_DEFAULT_CHANNEL)",
                           details=[{"field": "channel", "message": "required"}])
    return chosen


async def check_callback(request: web.Request, callback_url: str | None) -> None:
    """A callback_url is only accepted when the server can sign what it sends there, and when it
    leads to a public address (or one SIGNOFF_EGRESS_ALLOW opens): see bot.outbox.egress."""
    if not callback_url:
        return
    settings = request.app[SETTINGS]
    if not settings.webhook_secret:
        raise InvalidInput("callback_url needs SIGNOFF_WEBHOOK_SECRET to be set on the server, to sign the webhook",
                           details=[{"field": "callback_url", "message": "server has no webhook secret"}])
    try:
        await check_url(callback_url, EgressPolicy.from_entries(settings.egress_allow), unresolvable_ok=True)
    except EgressRefused as exc:
        raise InvalidInput(f"callback_url is refused: {exc}",
                           details=[{"field": "callback_url", "message": str(exc)}]) from None


def idempotency_key(request: web.Request) -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is not None and not 1 <= len(key) <= 255:
        raise InvalidInput("Idempotency-Key must be 1 to 255 characters")
    return key


def float_param(request: web.Request, name: str, *, default: float, low: float, high: float) -> float:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be a number between {low:g} and {high:g}") from None
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be between {low:g} and {high:g}")
    return value


def _encode_cursor(created_at: datetime, request_id: str) -> str:
    raw = json.dumps([iso(created_at), request_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    if not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, request_id = json.loads(raw)
        at = datetime.fromisoformat(created.replace("Z", "+00:00"))
        if at.tzinfo is None:  # ours always carry "Z"; a naive time would fail in storage
            raise ValueError("naive time")
        return at, str(request_id)
    except Exception:
        raise InvalidInput("cursor is not one this API returned") from None


def add_routes(app: web.Application) -> None:
    app[CHECKER] = checker = ParamsChecker()
    settings = app[SETTINGS]
    app[RATE] = SubmitRate(settings.submit_rate_per_token, settings.submit_burst_per_token)

    async def stop_checker(_: web.Application) -> None:
        checker.close()

    app.on_cleanup.append(stop_checker)
    app.router.add_post("/api/v1/approvals", create_approval)
    app.router.add_get("/api/v1/approvals", list_approvals)
    app.router.add_get("/api/v1/approvals/{id}", get_approval)
    app.router.add_post("/api/v1/approvals/{id}/cancel", cancel_approval)
    app.router.add_post("/api/v1/approvals/{id}/redeliver", redeliver_webhook)
    app.router.add_post("/api/v1/approvals/{id}/outcome", report_approval_outcome)
