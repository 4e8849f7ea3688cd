"""Assembles one Signoff process: storage, service, outbox, Slack (Bolt) and the HTTP server.

    POST /slack/events   events, interactivity, slash commands (signature verified by slack_sdk)
    /api/v1/...          agent API (bearer token)
    GET  /healthz        up or down (database check); details with SIGNOFF_METRICS_TOKEN or an admin API token
    GET  /metrics        Prometheus text format
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from datetime import timedelta
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from bot.outbox import effects
from bot.agent import slack as agent_slack
from bot.approvals.access import Access
from bot.agent.app import DEFAULT_AGENT, AgentRuntime, build_agent
from bot.domain.json_codec import dumps, loads
from bot.domain.model import Request
from bot.api import claude_hooks
from bot.api import grants as grants_api
from bot.api import longpoll
from bot.api import policy_check
from bot.api import resumes as resumes_api
from bot.api.rate import SubmitRate
from bot.api import routes as api
from bot.api import run_routes
from bot.api.slow_body import body_deadline
from bot.api.tokens import bearer, matching
from bot.api.mcp_http import add_mcp
from bot.api.webhooks import WebhookDelivery
from bot.api import audit as audit_api
from bot.approvals.audit import AuditLog
from bot.approvals.keys import DecisionKeys, load_keys
from storage.signing_keys import SigningKeyStore
from bot.process.clock import Clock, FileClock, SystemClock
from bot.outbox.egress import EgressPolicy, guarded_session
from bot.approvals.gate import PolicyGate
from bot.approvals.grants import Grants
from bot.approvals.resumes import Resumes
from bot.process.jobs import SweepJob
from bot.process.metrics import Metrics
from bot.live.waiters import CrossProcessWatcher, Waiters
from bot.outbox.dispatcher import Dispatcher
from bot.policy.holder import PolicyHolder
from bot.approvals.service import Service
from bot.process.settings import Settings
from bot.slack import (batch, blocks, grant_handlers, handlers, history_cards, history_handlers, shapes,
                       similar_handlers, suggestion_handlers)
from bot.slack.backlog import Backlog, Work
from bot.slack.form import parsed_request
from bot.slack.handlers import DirectClick
from bot.slack.listener_errors import AckTooLate
from bot.slack.payloads import BadPayload, extract_click
from bot.slack.batch import BatchInteractions
from bot.slack.batch_blocks import BATCH_REJECT, ITEM_EDIT
from bot.agent.blocks import CORRECT_RUN
from bot.slack.batch_delivery import BatchPages
from bot.slack.delivery import CardDelivery, SlackCall
from bot.slack.directory import SlackDirectory
from bot.slack.failures import SlackHealth, connect_socket_mode
from bot.slack.team import InstalledTeam
from bot.slack.timer_buttons import TimerInteractions
from bot.slack.undelivered import undelivered_check
from bot.slack.home import Home, HomePublisher
from bot.approvals.homes import HomeOpens
from bot.slack.interactions import Interactions
from bot.slack.pace import ChannelPace
from bot.slack.received import SlackInbox, Unavailable
from bot.approvals.received import Inputs
from bot.slack.grant_handlers import GrantInteractions
from bot.slack.suggestion_handlers import SuggestionInteractions
from bot.slack.history_handlers import HistoryInteractions
from bot.approvals.history import HistorySuggestions
from bot.approvals.similar import SimilarRequests
from bot.slack.similar_cards import similar_message
from bot.slack.similar_handlers import SimilarInteractions
from bot.slack.grant_views import AWAY
from bot.slack.notices import NoticeDelivery
from bot.slack.policy_cards import REMEMBER, FyiDelivery, render_policy_card
from bot.slack.stats_blocks import DigestDelivery, digest_message, home_section
from bot.approvals.timers import Timers
from storage.grants import GrantStore
from storage.pace_store import PaceStore
from storage.received import ReceivedStore
from storage.sql import SqlStore
from storage.stores import open_store

if TYPE_CHECKING:
    from bot.slack.socket_intake import DurableSocketMode

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024
# Clicks whose listener opens a modal: views.open needs the click's trigger_id within 3 s, so their
# listeners run at once instead of from the backlog.
OPENS_VIEW = frozenset({blocks.APPROVE_CONFIRM, blocks.EDIT, blocks.REJECT, blocks.RESPOND, blocks.ESCALATE, ITEM_EDIT, BATCH_REJECT,
                        REMEMBER, AWAY, CORRECT_RUN})
ACK_WITHIN_SECONDS = 2.5  # Slack gives up after 3 s
# What Slack sends that is stored before its ack (bot/slack/received.py); and slash commands.
DURABLE = frozenset({"block_actions", "view_submission", "event_callback"})
SIGNOFF: web.AppKey[Signoff] = web.AppKey("signoff")


@dataclass
class Signoff:
    """Everything one process runs; `web_app` starts and stops the background parts."""

    settings: Settings
    store: SqlStore
    service: Service
    dispatcher: Dispatcher
    watcher: CrossProcessWatcher
    bolt: AsyncApp
    clicks: AsyncApp  # the same listeners, run to completion (see build)
    metrics: Metrics
    http: aiohttp.ClientSession
    web_app: web.Application
    verifier: SignatureVerifier
    inbox: SlackInbox  # what Slack sent, stored before the ack (bot/slack/received.py)
    socket_handler: DurableSocketMode | None = None
    timers: Timers | None = None  # reminders, escalation, timeouts
    sweep_job: SweepJob | None = None
    agent: AgentRuntime | None = None  # Signoff's own agent runner
    egress_http: aiohttp.ClientSession | None = None  # for agent/API-chosen URLs only (bot.outbox.egress)
    background: set[asyncio.Task[Any]] = field(default_factory=set)
    backlog: Backlog = field(default_factory=Backlog)  # acked clicks' listener work, after a burst's acks
    slack_health: SlackHealth = field(default_factory=SlackHealth)  # how Slack answers lately (/healthz)
    _socket_task: asyncio.Task[None] | None = None
    policy: PolicyHolder | None = None  # the policy file in force; SIGHUP reloads it
    # Clicks whose listener needs nothing of Bolt's (handlers.direct_clicks): run without it
    direct_clicks: dict[str, DirectClick] = field(default_factory=dict)
    team: InstalledTeam | None = None  # the workspace the bot is installed in (bot/slack/team.py)

    async def _socket_intake(self, request: AsyncBoltRequest, raw: str) -> BoltResponse | None:
        """A Socket Mode request stored before its ack, like slack_events' (None: not one to store)."""
        body = request.body
        if body.get("type") not in DURABLE and "command" not in body:
            return None
        if self.team is not None and (refused := await self.team.check(body)) is not None:
            return BoltResponse(status=refused, body="")
        try:
            row = await self.inbox.accept(body, raw, "application/json")
        except Unavailable:  # no ack: Slack shows the person an error
            return BoltResponse(status=503, body="")
        if row is None:
            return BoltResponse(status=200, body="")
        return await _when_acked(self, request, row)

    def in_background(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run `work` after the response; kept referenced until done, awaited (briefly) at shutdown."""
        task = asyncio.create_task(work)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        return task

    async def start(self) -> None:
        self.backlog.start()
        self.inbox.start()  # and replays what a stopped process had acked and not handled
        await self.watcher.start()
        await self.dispatcher.start()
        if self.agent is not None:
            await self.agent.start()
        if self.sweep_job is not None:
            await self.sweep_job.start()
        if self.settings.socket_mode:
            from bot.slack.socket_intake import DurableSocketMode

            self.socket_handler = DurableSocketMode(self.bolt, self.settings.slack_app_token)
            self.socket_handler.intake = self._socket_intake
            # Connected in the background: Slack being unreachable must not keep the HTTP port (the agent
            # API) closed. A refused app token stops the retries with one line instead of a traceback a try.
            self._socket_task = asyncio.create_task(connect_socket_mode(self.socket_handler),
                                                    name="signoff-socket-mode")

    async def stop(self) -> None:
        if self._socket_task is not None:
            self._socket_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._socket_task
        if self.socket_handler is not None:
            await self.socket_handler.close_async()  # type: ignore[no-untyped-call]
        await self.backlog.stop()
        # Clicks already acked: let their listeners reach the database, and the notes they start
        # (ephemeral refusals, "already decided") reach Slack, before the session closes.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while self.background and (left := deadline - loop.time()) > 0:
            await asyncio.wait(list(self.background), timeout=left)
        await self.inbox.stop()  # the done marks of what finished
        if self.sweep_job is not None:
            await self.sweep_job.stop()
        if self.agent is not None:
            await self.agent.stop()
        await self.dispatcher.stop()
        await self.watcher.stop()
        if isinstance(self.service.directory, SlackDirectory):
            await self.service.directory.close()
        await self.http.close()
        if self.egress_http is not None:
            await self.egress_http.close()
        await self.store.close()


class FastJsonResponse(aiohttp.ClientResponse):
    """aiohttp's response whose `json()` reads with `json_codec.loads` (slack_sdk calls `json()` plainly)."""

    async def json(self, *, encoding: str | None = None, loads: Callable[[str], Any] = loads,
                   content_type: str | None = "application/json") -> Any:
        return await super().json(encoding=encoding, loads=loads, content_type=content_type)


def slack_session(timeout_seconds: float) -> aiohttp.ClientSession:
    """The session Slack's Web API calls share. They send their arguments (a card's blocks) as JSON and
    get the message back as JSON: orjson writes and reads both (bot/domain/json_codec.py), wherever
    it gives what `json` gives."""
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_seconds), json_serialize=dumps,
                                 response_class=FastJsonResponse)


def slack_client(settings: Settings, session: aiohttp.ClientSession, *, retries: bool) -> AsyncWebClient:
    """A Web API client on the process's shared session, so connections (TLS to Slack) are reused.

    Listener-side clients retry 429s themselves; the outbox's client does not (the outbox reschedules).
    """
    handlers_ = [AsyncConnectionErrorRetryHandler(), AsyncRateLimitErrorRetryHandler(max_retry_count=2)]
    return AsyncWebClient(
        token=settings.slack_bot_token,
        base_url=settings.slack_api_url,
        timeout=int(settings.http_timeout_seconds),
        retry_handlers=handlers_ if retries else [],
        session=session,
    )


async def build(settings: Settings, *, clock: Clock | None = None, store: SqlStore | None = None) -> Signoff:
    """Wire one process: every part is made here, and every outbox kind gets its handler here."""
    clock = clock or _clock(settings)
    policy = PolicyHolder(settings.policy_path, clock=clock)  # a bad file stops the start here: file:line: why
    store = store or await open_store(settings.database_url)
    keys = await load_keys(settings.signing_key, SigningKeyStore(store), clock.now())
    signer = keys.signer  # swapped in place when a rotation is seen (bot/approvals/keys.py)
    audit = AuditLog(store, anchor_every=settings.audit_anchor_seconds)
    metrics = Metrics(max_channels=settings.metrics_max_channels, max_tools=settings.metrics_max_tools)
    waiters = Waiters()
    # slack_sdk applies its own `timeout` only to sessions it creates: on a shared session the
    # session's timeout is the one that holds, so it is set here.
    http = slack_session(settings.http_timeout_seconds)
    listener_client = slack_client(settings, http, retries=True)
    directory = SlackDirectory(listener_client)
    grant_store = GrantStore(store)
    gate = PolicyGate(policy, grant_store, directory)  # policy, grants and delegation at submit

    async def still_delegate(request: Request, user: str) -> bool:
        return await gate.still_delegate(request, user, clock.now())

    service = Service(store, clock=clock, waiters=waiters, directory=directory, metrics=metrics,
                      default_timing=settings.default_timing(), gate=gate, max_pending=settings.max_pending_per_token,
                      access=Access(directory, still_delegate=still_delegate))
    timers = Timers(service, clock)
    service.stats.digest_channels, service.stats.digest_at = settings.digest_channels, settings.digest_at
    service.stats.render_digest = digest_message
    service.stats.latest_anchor = audit.latest_anchor  # the digest ends with the audit chain's signed head
    home = Home(service.reads, HomeOpens(store), clock, viewed=service.stats.viewed)
    # The outbox's Web API client does not retry by itself: the outbox reschedules.
    health = SlackHealth()
    pace = ChannelPace(clock, settings.slack_channel_pace_seconds, PaceStore(store))  # shared by replicas
    call = SlackCall(slack_client(settings, http, retries=False), metrics, health, pace)
    agent = build_agent(settings, service=service, store=store, call=call, client=listener_client, clock=clock,
                        metrics=metrics)

    # Every outbox kind and its one handler. The card shows escalation, timeout and policy notes
    # and "Approve & remember" (render_policy_card), and question requests get question cards (render_any).
    cards = CardDelivery(service, call, clock, render=agent_slack.render_any(render_policy_card))
    pages = BatchPages(cards, service, clock)  # a batch card's continuation pages, wrapping the card's
    home_publisher = HomePublisher(home, call, clock)
    egress = EgressPolicy.from_entries(settings.egress_allow)
    egress_http = guarded_session(egress, timeout=settings.http_timeout_seconds)
    webhooks = WebhookDelivery(egress_http, settings.webhook_secret, clock=clock, metrics=metrics,
                               max_attempts=settings.webhook_max_attempts, timeout=settings.http_timeout_seconds,
                               policy=egress, max_age=settings.webhook_max_age,
                               backoff_cap=settings.webhook_backoff_cap_seconds, signer=signer)
    outbox_handlers = effects.registry(
        pages.handlers(),
        webhooks.handlers(),
        NoticeDelivery(service, call, clock, directory).handlers(),
        home_publisher.handlers(),
        agent.delivery.handlers(),
        FyiDelivery(service.reads, call, clock).handlers(),
        DigestDelivery(call).handlers(),
    )
    dispatcher = Dispatcher(store, outbox_handlers, clock=clock, metrics=metrics,
                            sweep_seconds=settings.outbox_sweep_seconds, lease_seconds=settings.outbox_lease_seconds)
    store.on_outbox_commit(dispatcher.wake)
    dispatcher.on_card_stored(service.known.card_stored)  # a click checks the card it holds (bot/live/pending_states.py)

    # Two Bolt apps with the same listeners. `clicks` runs a listener to its end: slack_events()
    # acks clicks and events itself and answers modals and commands when their listener calls
    # ack(), and the backlog and a graceful stop must know when the work is done. `bolt` is Bolt's
    # usual (ack first, listener in a task of its own): url_verification, and all of Socket Mode.
    background: set[asyncio.Task[Any]] = set()  # work after a response; Signoff.stop waits for it
    interactions = Interactions(service, listener_client, clock, metrics, background=background)
    timer_interactions = TimerInteractions(interactions, timers, listener_client, metrics)
    bolt, clicks = (
        AsyncApp(
            client=listener_client,
            signing_secret=settings.slack_signing_secret or "socket-mode-has-no-signing-secret",
            request_verification_enabled=not settings.socket_mode,
            process_before_response=inline,
        )
        for inline in (False, True)
    )
    grants = Grants(grant_store, clock)

    async def auth_test() -> dict[str, Any]:
        answer = (await listener_client.auth_test()).data
        return answer if isinstance(answer, dict) else {}

    team = InstalledTeam(auth_test)
    bolt.use(team.middleware())  # Socket Mode's requests reach Bolt directly; HTTP's are checked in slack_events
    grant_interactions = GrantInteractions(interactions, grants, home)
    history = HistorySuggestions(store, grant_store, clock, thresholds=settings.suggest,
                                 grant_days=settings.suggest_grant_days, policy=lambda: policy.policy,
                                 members=directory.group_members)

    async def home_tail(user: str) -> list[dict[str, Any]]:  # away and grants, suggestions, then the last 7 days
        return [*await grant_interactions.home_blocks(user),
                *history_cards.home_blocks(await history.for_user(user), grant_days=history.grant_days),
                *home_section(await service.stats.last_week(None))]

    async def digest_more(channel: str) -> list[dict[str, Any]]:  # the suggestions from this channel's decisions
        return history_cards.digest_blocks(await history.for_channel(channel), grant_days=history.grant_days)

    service.stats.digest_more = digest_more
    similar = SimilarRequests(store, clock, min_size=settings.similar_min, render=similar_message)
    timers.after_sweep.append(similar.tick)  # a card for each group of similar pending requests

    home_publisher.tail = home_tail
    for app in (bolt, clicks):
        agent.register(app)  # before the core listeners: `/signoff run ...` must match first
        grant_handlers.register(app, grant_interactions)  # `/signoff grants|away|back` too
        suggestion_handlers.register(app, SuggestionInteractions(interactions, grants))  # "Approve & always allow"
        history_handlers.register(app, HistoryInteractions(interactions, history, home))  # suggestions from history
        similar_handlers.register(app, SimilarInteractions(interactions))  # Review each / Approve all / Reject all
        handlers.register(app, interactions, timers=timer_interactions, home=home)
        batch.register(app, BatchInteractions(interactions))

    web_app = web.Application(client_max_size=MAX_BODY_BYTES,
                              middlewares=[body_deadline(settings.body_timeout_seconds), api.json_errors, api.bearer_auth,
                                           longpoll.cap_long_polls])
    limits = web_app[longpoll.LIMITS] = longpoll.LongPollLimits(settings.longpoll_per_token, settings.longpoll_max)
    metrics.long_polls.set_function(lambda: limits.held)
    verifier = SignatureVerifier(settings.slack_signing_secret or "")
    watcher = CrossProcessWatcher(store, waiters, metrics)
    received = ReceivedStore(store, clock.now, timedelta(seconds=settings.slack_inbox_lease_seconds))
    inbox = SlackInbox(Inputs(received), clicks.async_dispatch, lease_seconds=settings.slack_inbox_lease_seconds,
                       spawn=lambda work: signoff.in_background(work))
    received.marked = inbox.marked
    timers.input_open = inbox.inputs.open_for  # a timeout waits for a person's stored, unhandled click
    signoff = Signoff(settings, store, service, dispatcher, watcher, bolt, clicks, metrics,
                      http, web_app, verifier, inbox, timers=timers, sweep_job=SweepJob(_and_seal(timers.sweep, audit, keys, clock), settings.sweep_seconds,
                                                         done=metrics.sweeps.labels("timers").inc),
                      agent=agent, slack_health=health, policy=policy, egress_http=egress_http,
                      background=background, team=team)
    signoff.direct_clicks = handlers.direct_clicks(interactions)
    signoff.metrics.click_backlog.set_function(lambda: signoff.backlog.queued)
    signoff.watcher.checks.append(agent.ended_runs)
    signoff.watcher.checks.append(undelivered_check(service.reads))
    web_app[SIGNOFF] = signoff
    web_app[api.SERVICE] = service
    web_app[api.SETTINGS] = settings
    web_app[api.SIGNER] = signer
    if not settings.socket_mode:
        web_app.router.add_post("/slack/events", slack_events)
    web_app.router.add_get("/healthz", healthz)
    web_app.router.add_get("/metrics", metrics_endpoint)
    api.add_routes(web_app)
    claude_hooks.add_routes(web_app)
    audit_api.add_routes(web_app, audit, keys)
    grants_api.add_routes(web_app, grants, policy)
    resumes_api.add_routes(web_app, Resumes(store, clock), SubmitRate(
        settings.submit_rate_per_token, settings.submit_burst_per_token, what="resume calls", doing="sends resume calls"))
    policy_check.add_routes(web_app, SubmitRate(
        settings.submit_rate_per_token, settings.submit_burst_per_token, what="policy checks", doing="checks policy"))
    run_routes.add_routes(web_app, agent.run_service, agent.runner, DEFAULT_AGENT)
    add_mcp(web_app, settings)  # MCP tools over streamable HTTP at /mcp (issue 10)

    async def lifecycle(_app: web.Application) -> AsyncIterator[None]:
        await signoff.start()
        yield
        await signoff.stop()

    web_app.cleanup_ctx.append(lifecycle)
    return signoff


def _and_seal(sweep: Callable[[], Awaitable[Any]], audit: AuditLog, keys: DecisionKeys,
              clock: Clock) -> Callable[[], Awaitable[None]]:
    """The timers' sweep, then the audit rows written since the last one sealed into the chain (off the
    approval path: a decision writes its audit row as before; bot/approvals/audit.py), the signing keys
    read again (a rotation made elsewhere) and, when due, the chain's head anchored."""
    async def both() -> None:
        try:
            await sweep()
        finally:
            await audit.seal()
            await keys.refresh()
            await audit.anchor_tick(keys.signer, clock.now())
    return both


def _clock(settings: Settings) -> Clock:
    if settings.clock_file:
        log.warning("TEST CLOCK: the time comes from %s (SIGNOFF_CLOCK_FILE); never set this in production",
                    settings.clock_file)
        return FileClock(settings.clock_file)
    return SystemClock()


async def slack_events(request: web.Request) -> web.Response:
    signoff = request.app[SIGNOFF]
    started = time.perf_counter()
    body = await request.text()
    # Bolt verifies too, but only after parsing; a signed-but-malformed body must not become a 500.
    if not signoff.verifier.is_valid_request(body, dict(request.headers)):
        return web.json_response({"error": "invalid request"}, status=401)
    signoff.backlog.arrived()  # only Slack's own requests hold clicks' work back
    try:
        bolt_request = parsed_request(body, request.query_string, request.headers)
    except ValueError as exc:
        return web.json_response({"error": f"malformed Slack payload: {exc}"}, status=400)
    except (TypeError, AttributeError, KeyError, IndexError) as exc:
        # Bolt reads ids out of the body as it builds the request; a signed body of the wrong shape
        # (`"user": true`) breaks it there. Ack it (Slack must not retry) and read nothing.
        log.warning("dropped a signed Slack payload Bolt could not read: %s: %s", type(exc).__name__, exc)
        return web.Response(status=200)
    malformed = shapes.problem(bolt_request.body)
    if malformed is not None:
        # Signed, so from Slack (or whoever holds the secret): ack, so nothing is retried; read nothing.
        log.warning("dropped a signed Slack payload of the wrong shape: %s", malformed)
        return web.Response(status=200)
    if signoff.team is not None and (refused := await signoff.team.check(bolt_request.body)) is not None:
        return web.Response(status=refused)  # addressed to another workspace (acked), or ours is not known yet
    kind = bolt_request.body.get("type")
    row: int | None = None
    if kind in DURABLE or "command" in bolt_request.body:
        # Stored before the ack (bot/slack/received.py): a click Slack saw taken is handled even if this
        # process dies before its work ran. Stored before: Slack's retry of it, acked and dropped.
        try:
            row = await signoff.inbox.accept(bolt_request.body, body, bolt_request.content_type or "")
        except Unavailable:  # logged once per outage; Slack shows the person an error: nothing was promised
            return web.json_response({"error": "unavailable"}, status=503)
        if row is None:
            response = web.Response(status=200)
            signoff.metrics.ack_latency.labels(_kind(body)).observe(time.perf_counter() - started)
            return response
    if kind == "block_actions" and row is not None:
        # Slack ignores the body of a button click's ack. Answer as soon as the click is stored;
        # Bolt runs the listener afterwards, from the backlog unless it opens a modal, so the acks
        # of a burst of clicks never wait behind the listener work of the clicks before them.
        held = signoff.inbox.held_work
        actions = bolt_request.body.get("actions") or []
        direct = _direct_click(signoff, bolt_request.body, actions)
        if direct is not None and not len(signoff.backlog):
            # A lone click: started now, not two turns of the loop later. A click that comes in while it
            # runs is queued (the backlog counts it), so a burst's acks never wait behind its work.
            signoff.backlog.start_now(held(row, direct))
        elif direct is not None:
            signoff.backlog.add(held(row, direct))
        elif any(isinstance(a, dict) and a.get("action_id") in OPENS_VIEW for a in actions):
            signoff.in_background(held(row, lambda: signoff.clicks.async_dispatch(bolt_request))())
        else:
            # The backlog keeps the raw body, not the parsed one: a click's payload carries the whole
            # card (hundreds of small objects), and a burst of them held while queued would fill the
            # young GC generation, whose collections stop the event loop, acks included.
            query, headers = request.query_string, dict(request.headers)
            signoff.backlog.add(held(row, lambda: signoff.clicks.async_dispatch(parsed_request(body, query, headers))))
        response = web.Response(status=200)
    elif (kind == "view_submission" or "command" in bolt_request.body) and row is not None:
        # A modal's answer (validation errors) and a command's reply are whatever the listener passes
        # to ack(): answer the moment it does, and let the listener finish in the background.
        response = await to_aiohttp_response(await _when_acked(signoff, bolt_request, row))
    elif kind == "view_closed":
        response = await to_aiohttp_response(await _when_acked(signoff, bolt_request, None))
    elif kind == "event_callback" and row is not None:
        # Slack reads nothing from an event's ack but the status. Run the listener to its end in
        # the background, tracked, so that a graceful stop lets it finish.
        signoff.in_background(signoff.inbox.held_work(row, lambda: signoff.clicks.async_dispatch(bolt_request))())
        response = web.Response(status=200)
    else:  # url_verification (Bolt answers the challenge), options, shortcuts, anything else
        response = await to_aiohttp_response(await signoff.bolt.async_dispatch(bolt_request))
    signoff.metrics.ack_latency.labels(_kind(body)).observe(time.perf_counter() - started)
    return response


def _direct_click(signoff: Signoff, body: dict[str, Any], actions: list[Any]) -> Work | None:
    """The work of a lone click on a button with a direct listener (Approve), or None (Bolt's way).

    Only the small `Click` is kept while it waits in the backlog, not the payload (see above); a
    payload `extract_click` refuses goes Bolt's way, whose listener tells the person why.
    """
    if len(actions) != 1 or not isinstance(actions[0], dict):
        return None
    listener = signoff.direct_clicks.get(actions[0].get("action_id"))  # type: ignore[arg-type]
    if listener is None:
        return None
    try:
        click = extract_click(body)
    except BadPayload:
        return None
    return lambda: listener(click)


class _SignallingAck(AsyncAck):
    """Bolt's ack(), which also hands the answer it built to whoever waits for it.

    The answer is kept apart from `self.response`: if the listener fails after acking, Bolt
    overwrites that with a 500, but Slack must get what was acked.
    """

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Bolt's __init__ has no annotations
        self.answer: asyncio.Future[BoltResponse] = asyncio.get_running_loop().create_future()

    async def __call__(self, *args: Any, **kwargs: Any) -> BoltResponse:
        if self.answer.cancelled():
            # Slack was answered 500 at the deadline and told the person it failed: what the listener
            # was about to do on this ack must not happen behind their back.
            raise AckTooLate(f"the listener acked after Slack's answer was sent ({ACK_WITHIN_SECONDS:.1f} s)")
        response = await super().__call__(*args, **kwargs)
        if not self.answer.done():
            self.answer.set_result(response)
        return response


async def _when_acked(signoff: Signoff, bolt_request: AsyncBoltRequest, row: int | None) -> BoltResponse:
    """Run the listener to its end in the background; return its ack as soon as it acks.

    Bolt's own way (`process_before_response=False`) checks for the ack every 10 ms, so no answer
    came sooner than 10 ms; this one wakes on the ack itself. If the listener ends without acking
    (no listener matched, or it failed), Bolt's response for that is the answer.
    """
    ack = _SignallingAck()
    bolt_request.context["ack"] = ack
    async def dispatch() -> BoltResponse:
        return await signoff.clicks.async_dispatch(bolt_request)

    run = signoff.in_background(dispatch() if row is None else signoff.inbox.held_work(row, dispatch)())
    await asyncio.wait({run, ack.answer}, timeout=ACK_WITHIN_SECONDS, return_when=asyncio.FIRST_COMPLETED)
    if ack.answer.done():
        return ack.answer.result()
    ack.answer.cancel()
    if run.done() and not run.cancelled() and run.exception() is None and run.result() is not None:
        answered: BoltResponse = run.result()
        return answered
    log.error("a Slack listener did not acknowledge within %.1f s", ACK_WITHIN_SECONDS)
    return BoltResponse(status=500, body="")


def _may_scrape(settings: Settings, request: web.Request) -> bool:
    if settings.metrics_token and matching(bearer(request.headers.get("Authorization")), [settings.metrics_token]):
        return True
    try:
        peer = ipaddress.ip_address((request.remote or "").split("%", 1)[0])
    except ValueError:
        return False
    return any(peer in ipaddress.ip_network(n, strict=False) for n in settings.metrics_allow)


def _kind(text: str) -> str:
    """The kind of Slack request, from its raw body (Bolt's parsed `body` is a dict)."""
    if text.startswith("payload="):
        return "interactive"
    if text.startswith("{"):
        return "event"
    return "command" if "command=" in text else "other"


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
