"""Every HTTP route of one process, and the middlewares in front of them.

    POST /slack/events   events, interactivity, slash commands (bot/process/slack_endpoint.py; not in Socket Mode)
    GET  /healthz        up or down; details with SIGNOFF_METRICS_TOKEN or an admin API token (bot/process/health.py)
    GET  /metrics        Prometheus text format (bot/process/health.py)
    /api/v1/...          the agent API, bearer token (bot/api/: requests, hooks, audit, grants, resumes,
                         policy checks, runs)
    /mcp                 MCP tools over streamable HTTP (bot/api/mcp_http.py)

Middlewares, outermost first: a deadline on reading the body, JSON errors, bearer auth, the cap on
long-polls held at once.
"""

from __future__ import annotations

from aiohttp import web

from bot.agent.app import DEFAULT_AGENT, AgentRuntime
from bot.api import audit as audit_api
from bot.api import claude_hooks, elicitations, longpoll, policy_check, run_routes
from bot.api import grants as grants_api
from bot.api import resumes as resumes_api
from bot.api import routes as api
from bot.api.mcp_http import add_mcp
from bot.api.rate import SubmitRate
from bot.api.slow_body import body_deadline
from bot.approvals.audit import AuditLog
from bot.approvals.grants import Grants
from bot.approvals.keys import DecisionKeys, Signer
from bot.approvals.resumes import Resumes
from bot.approvals.retention import Archive
from bot.policy.holder import PolicyHolder
from bot.process.health import healthz, metrics_endpoint
from bot.process.lifecycle import SIGNOFF, Signoff
from bot.process.metrics import Metrics
from bot.process.settings import Settings
from bot.process.slack_endpoint import slack_events

MAX_BODY_BYTES = 1024 * 1024


def web_application(settings: Settings, metrics: Metrics) -> web.Application:
    """The aiohttp application with its middlewares and the long-poll limits (no routes yet)."""
    web_app = web.Application(client_max_size=MAX_BODY_BYTES,
                              middlewares=[body_deadline(settings.body_timeout_seconds), api.json_errors, api.bearer_auth,
                                           longpoll.cap_long_polls])
    limits = web_app[longpoll.LIMITS] = longpoll.LongPollLimits(settings.longpoll_per_token, settings.longpoll_max)
    metrics.long_polls.set_function(lambda: limits.held)
    return web_app


def add_routes(web_app: web.Application, signoff: Signoff, *, signer: Signer, audit: AuditLog, keys: DecisionKeys,
               grants: Grants,
               policy: PolicyHolder, resumes: Resumes, agent: AgentRuntime) -> None:
    """Every route above, on `web_app`, served by `signoff`'s parts."""
    settings = signoff.settings
    web_app[SIGNOFF] = signoff
    web_app[api.SERVICE] = signoff.service
    web_app[api.SETTINGS] = settings
    web_app[api.SIGNER] = signer
    web_app[api.ARCHIVE] = Archive(signoff.store)
    if not settings.socket_mode:
        web_app.router.add_post("/slack/events", slack_events)
    web_app.router.add_get("/healthz", healthz)
    web_app.router.add_get("/metrics", metrics_endpoint)
    api.add_routes(web_app)
    claude_hooks.add_routes(web_app)
    elicitations.add_routes(web_app)
    audit_api.add_routes(web_app, audit, keys)
    grants_api.add_routes(web_app, grants, policy)
    resumes_api.add_routes(web_app, resumes, SubmitRate(
        settings.submit_rate_per_token, settings.submit_burst_per_token, what="resume calls", doing="sends resume calls"))
    policy_check.add_routes(web_app, SubmitRate(
        settings.submit_rate_per_token, settings.submit_burst_per_token, what="policy checks", doing="checks policy"))
    run_routes.add_routes(web_app, agent.run_service, agent.runner, DEFAULT_AGENT)
    add_mcp(web_app, settings)  # MCP tools over streamable HTTP at /mcp (issue 10)
