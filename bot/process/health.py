"""GET /healthz (up or down; the details for a metrics or admin token) and GET /metrics (Prometheus)."""

from __future__ import annotations

import ipaddress

from aiohttp import web

from bot.api.tokens import bearer, matching
from bot.process.lifecycle import SIGNOFF
from bot.process.settings import Settings


def _may_scrape(settings: Settings, request: web.Request) -> bool:
    if settings.metrics_token and matching(bearer(request.headers.get("Authorization")), [settings.metrics_token]):
        return True
    try:
        peer = ipaddress.ip_address((request.remote or "").split("%", 1)[0])
    except ValueError:
        return False
    return any(peer in ipaddress.ip_network(n, strict=False) for n in settings.metrics_allow)



def _may_see_details(settings: Settings, request: web.Request) -> bool:
    """A bearer token that is SIGNOFF_METRICS_TOKEN or an admin API token (compared with every one)."""
    secrets = [t.secret for t in settings.api_token_specs if t.admin]
    if settings.metrics_token:
        secrets.append(settings.metrics_token)
    return bool(matching(bearer(request.headers.get("Authorization")), secrets))


async def healthz(request: web.Request) -> web.Response:
    """Up or down for anyone (`{"status": "ok"}`, or 503); the database and Slack's state (the workspace,
    the bot, the last undelivered request) only for SIGNOFF_METRICS_TOKEN or an admin API token."""
    signoff = request.app[SIGNOFF]
    details = _may_see_details(signoff.settings, request)
    if not details and "details" in request.query:
        return web.json_response({"error": {"code": "unauthorized", "message": "/healthz details need "
                                            "SIGNOFF_METRICS_TOKEN or an admin API token (Authorization: Bearer ...)"}},
                                 status=401, headers={"WWW-Authenticate": 'Bearer realm="signoff"'})
    try:
        await signoff.store.statuses(["healthz"])
    except Exception as exc:  # the point of a health check is to say so
        if not details:
            return web.json_response({"status": "unavailable"}, status=503)
        return web.json_response({"status": "unavailable", "ok": False, "database": f"{type(exc).__name__}",
                                  "slack": signoff.slack_health.to_json()}, status=503)
    if not details:
        return web.json_response({"status": "ok"})
    # Slack's state is reported, not judged: a refused token is the operator's to fix, and taking the
    # process out of a load balancer would close the agent API as well.
    return web.json_response({"status": "ok", "ok": True, "database": signoff.store.dialect,
                              "slack": signoff.slack_health.to_json()})


async def metrics_endpoint(request: web.Request) -> web.Response:
    """Prometheus text, for a scraper that shows SIGNOFF_METRICS_TOKEN or connects from SIGNOFF_METRICS_ALLOW."""
    signoff = request.app[SIGNOFF]
    if not _may_scrape(signoff.settings, request):
        return web.json_response({"error": {"code": "forbidden", "message": "metrics need SIGNOFF_METRICS_TOKEN "
                                            "(Authorization: Bearer ...) or a client address in SIGNOFF_METRICS_ALLOW"}},
                                 status=403)
    return web.Response(body=signoff.metrics.render(), headers={"Content-Type": signoff.metrics.content_type})
