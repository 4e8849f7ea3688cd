"""The audit log and the decision keys over HTTP.

    GET /api/v1/audit                 admin tokens only (403 for an agent token). Oldest first, paged:
                                      ?limit=1..500 (default 100) &cursor=<next_cursor of the last page>;
                                      filters ?since=&until= (ISO times), &tool= (the request's action),
                                      &person= (the actor, a Slack user id), &outcome=, &type=.
                                      {"items": [...], "next_cursor": ... | null}; each item has its
                                      chain position `seq` and `hash` (null until sealed) and `tool`
    GET /api/v1/audit/head            any token: {"anchor": the latest signed anchor of the chain's head
                                      (seq, hash, at, signature) or null, "head": {"seq", "hash"} as sealed
                                      now}; save the anchor, check later with `signoff audit verify --anchor`
    GET /api/v1/keys                  the public decision-signing keys (any token)
    GET /.well-known/signoff-keys     the same, without a token (what the agent side pins)
"""

from __future__ import annotations

import base64
from datetime import datetime

from aiohttp import web

from bot.api.owners import token_of
from bot.api.routes import SIGNER, float_param
from bot.approvals.audit import AuditLog
from bot.approvals.keys import DecisionKeys
from bot.domain.audit_chain import AuditFilter
from bot.errors import Forbidden, InvalidInput

AUDIT = web.AppKey("audit_log", AuditLog)
KEYS = web.AppKey("decision_keys", DecisionKeys)
MAX_PAGE = 500


def _time(request: web.Request, name: str) -> datetime | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    try:
        at = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{name} must be an ISO 8601 time, like 2026-12-01T00:00:00Z") from None
    if at.tzinfo is None:
        raise InvalidInput(f"{name} must say its time zone (a trailing Z for UTC)")
    return at


def _text(request: web.Request, name: str) -> str | None:
    raw = request.query.get(name)
    if raw is not None and not 1 <= len(raw) <= 200:
        raise InvalidInput(f"{name} must be 1 to 200 characters")
    return raw


def _cursor(raw: str | None) -> int:
    if not raw:
        return 0
    try:
        value = int(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode())
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("cursor is not one this API returned") from None
    if value < 0:
        raise InvalidInput("cursor is not one this API returned")
    return value


def _next(last_id: int) -> str:
    return base64.urlsafe_b64encode(str(last_id).encode()).decode().rstrip("=")


async def list_audit(request: web.Request) -> web.Response:
    if not token_of(request).admin:  # before anything is read: an agent token learns nothing of the log
        raise Forbidden("only an admin token may read the audit log")
    wanted = AuditFilter(since=_time(request, "since"), until=_time(request, "until"), tool=_text(request, "tool"),
                         person=_text(request, "person"), outcome=_text(request, "outcome"),
                         type=_text(request, "type"))
    limit = int(float_param(request, "limit", default=100, low=1, high=MAX_PAGE))
    rows = await request.app[AUDIT].page(wanted, after_id=_cursor(request.query.get("cursor")), limit=limit + 1)
    page, more = rows[:limit], len(rows) > limit
    return web.json_response({"items": [r.to_json() for r in page],
                              "next_cursor": _next(page[-1].row.id) if more and page else None})


async def audit_head(request: web.Request) -> web.Response:
    log = request.app[AUDIT]
    anchor = await log.latest_anchor()
    seq, head = await log.head()
    return web.json_response({"anchor": anchor.to_json() if anchor is not None else None,
                              "head": {"seq": seq, "hash": head}})


async def keys(request: web.Request) -> web.Response:
    return web.json_response(request.app[SIGNER].keys_json(), headers={"Cache-Control": "max-age=60"})


def add_routes(app: web.Application, audit: AuditLog, decision_keys: DecisionKeys) -> None:
    app[AUDIT] = audit
    app[KEYS] = decision_keys
    app.router.add_get("/api/v1/audit", list_audit)
    app.router.add_get("/api/v1/audit/head", audit_head)
    app.router.add_get("/api/v1/keys", keys)
    app.router.add_get("/.well-known/signoff-keys", keys)
