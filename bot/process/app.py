"""Builds one Signoff process: every part is made here, and every outbox kind gets its handler here.

The parts are storage, the use cases, the outbox, Slack (Bolt) and the HTTP server; bot/process/routes.py
lists the routes, bot/process/slack_listeners.py the Slack listeners, bot/process/lifecycle.py starts
and stops what runs in the background.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from functools import partial
from typing import Any

from aiohttp import web
from slack_sdk.signature import SignatureVerifier

from bot.agent import slack_outbox
from bot.agent.app import AgentRuntime, build_agent
from bot.api.webhooks import WebhookDelivery
from bot.approvals.access import Access
from bot.approvals.assist import Assist
from bot.assist.claude import Claude
from bot.approvals.audit import AuditLog
from bot.approvals.keys import DecisionKeys, load_keys
from bot.approvals.foreign_changes import CrossProcessWatcher
from bot.approvals.gate import PolicyGate
from bot.approvals.grants import Grants
from bot.approvals.history import HistorySuggestions
from bot.approvals.homes import HomeOpens
from bot.approvals.outbox_rows import OutboxRows
from bot.approvals.received import Inputs
from bot.approvals.resumes import Resumes
from bot.approvals.retention import Retention
from bot.approvals.service import Service
from bot.approvals.similar import SimilarRequests
from bot.approvals.timers import Timers
from bot.domain.model import Request
from bot.live.waiters import Waiters
from bot.outbox import effects
from bot.outbox.dispatcher import Dispatcher
from bot.outbox.egress import EgressPolicy, guarded_session
from bot.policy.holder import PolicyHolder
from bot.process import routes, slack_endpoint, slack_listeners
from bot.process.clock import Clock, FileClock, SystemClock
from bot.process.jobs import SweepJob
from bot.process.lifecycle import Signoff
from bot.process.metrics import Metrics
from bot.process.settings import Settings
from bot.process.slack_clients import slack_client, slack_session
from bot.slack import handlers, history_cards
from bot.slack.assist import AnswerDelivery
from bot.slack.batch_delivery import BatchPages
from bot.slack.delivery import CardDelivery, SlackCall
from bot.slack.directory import SlackDirectory
from bot.slack.failures import SlackHealth
from bot.slack.grant_handlers import GrantInteractions
from bot.slack.home import Home, HomePublisher
from bot.slack.interactions import Interactions
from bot.slack.notices import NoticeDelivery
from bot.slack.pace import ChannelPace
from bot.slack.policy_cards import FyiDelivery, render_policy_card
from bot.slack.received import SlackInbox
from bot.slack.similar_delivery import SimilarDelivery
from bot.slack.stats_blocks import DigestDelivery, digest_message, home_section
from bot.slack.team import InstalledTeam
from bot.slack.timer_buttons import TimerInteractions
from bot.slack.undelivered import undelivered_check
from storage.grants import GrantStore
from storage.similar import SimilarStore
from storage.pace_store import PaceStore
from storage.received import ReceivedStore
from storage.signing_keys import SigningKeyStore
from storage.sql import SqlStore
from storage.stores import open_store

log = logging.getLogger(__name__)


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
    cards = CardDelivery(service, call, clock, render=slack_outbox.render_any(render_policy_card))
    pages = BatchPages(cards, service, clock)  # a batch card's continuation pages, wrapping the card's
    home_publisher = HomePublisher(home, call, clock)
    egress = EgressPolicy.from_entries(settings.egress_allow)
    egress_http = guarded_session(egress, timeout=settings.http_timeout_seconds)
    webhooks = WebhookDelivery(egress_http, settings.webhook_secret, clock=clock, metrics=metrics,
                               max_attempts=settings.webhook_max_attempts, timeout=settings.http_timeout_seconds,
                               policy=egress, max_age=settings.webhook_max_age,
                               backoff_cap=settings.webhook_backoff_cap_seconds, signer=signer)
    # A card for each group of similar pending requests, kept up to date as they are decided.
    similar = SimilarRequests(store, SimilarStore(store), clock, min_size=settings.similar_min)
    timers.after_sweep.append(similar.tick)
    service.on_decided(similar.decided)
    if settings.retention_days is not None:  # decided requests older than N days out of the hot tables
        timers.after_sweep.append(Retention(store, clock, settings.retention_days).tick)
    outbox_handlers = effects.registry(
        SimilarDelivery(similar, service.reads, call).handlers(),
        pages.handlers(),
        AnswerDelivery(call).handlers(),
        webhooks.handlers(),
        NoticeDelivery(service, call, clock, directory).handlers(),
        home_publisher.handlers(),
        agent.delivery.handlers(),
        FyiDelivery(service.reads, call, clock).handlers(),
        DigestDelivery(call).handlers(),
    )
    dispatcher = Dispatcher(OutboxRows(store), outbox_handlers, clock=clock, metrics=metrics,
                            sweep_seconds=settings.outbox_sweep_seconds, lease_seconds=settings.outbox_lease_seconds)
    store.on_outbox_commit(dispatcher.wake)
    dispatcher.on_card_stored(service.known.card_stored)  # a click checks the card it holds (bot/live/pending_states.py)
    assist = _assist(settings, service, agent, metrics, clock)
    if assist is not None:  # AI notes once a card is posted; answers in its thread (docs/ai-notes.md)
        dispatcher.on_card_stored(assist.card_stored)
        agent.interactions.assist = assist

    background: set[asyncio.Task[Any]] = set()  # work after a response; Signoff.stop waits for it
    interactions = Interactions(service, listener_client, clock, metrics, background=background)
    timer_interactions = TimerInteractions(interactions, timers, listener_client, metrics)
    grants = Grants(grant_store, clock)

    async def auth_test() -> dict[str, Any]:
        answer = (await listener_client.auth_test()).data
        return answer if isinstance(answer, dict) else {}

    team = InstalledTeam(auth_test)
    bolt, clicks = slack_listeners.bolt_apps(settings, listener_client, team)
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

    home_publisher.tail = home_tail
    slack_listeners.register((bolt, clicks), agent=agent, interactions=interactions, timers=timer_interactions,
                             grant_interactions=grant_interactions, grants=grants, home=home, history=history)

    web_app = routes.web_application(settings, metrics)
    verifier = SignatureVerifier(settings.slack_signing_secret or "")
    watcher = CrossProcessWatcher(store, waiters, metrics, changed=service.known.forget)
    received = ReceivedStore(store, clock.now, timedelta(seconds=settings.slack_inbox_lease_seconds))
    inbox = SlackInbox(Inputs(received), clicks.async_dispatch, lease_seconds=settings.slack_inbox_lease_seconds,
                       spawn=lambda work: signoff.in_background(work))
    received.marked = inbox.marked
    timers.input_open = inbox.inputs.open_for  # a timeout waits for a person's stored, unhandled click
    signoff = Signoff(settings, store, service, dispatcher, watcher, bolt, clicks, metrics,
                      http, web_app, verifier, inbox, timers=timers, sweep_job=SweepJob(_and_seal(timers.sweep, audit, keys, clock), settings.sweep_seconds,
                                                         done=metrics.sweeps.labels("timers").inc),
                      agent=agent, slack_health=health, policy=policy, egress_http=egress_http,
                      background=background, team=team, assist=assist)
    similar.spawn = signoff.in_background  # a decided request's card refresh, after its commit
    signoff.direct_clicks = handlers.direct_clicks(interactions)
    signoff.metrics.click_backlog.set_function(lambda: signoff.backlog.queued)
    signoff.watcher.checks.append(agent.ended_runs)
    signoff.watcher.checks.append(undelivered_check(service.reads))
    signoff.socket_intake = partial(slack_endpoint.socket_intake, signoff)
    routes.add_routes(web_app, signoff, signer=signer, audit=audit, keys=keys, grants=grants, policy=policy,
                      resumes=Resumes(store, clock), agent=agent)

    async def answer_long_polls(_app: web.Application) -> None:
        waiters.close()

    web_app.on_shutdown.append(answer_long_polls)  # before aiohttp waits for the handlers still running

    async def lifecycle(_app: web.Application) -> AsyncIterator[None]:
        await signoff.start()
        yield
        await signoff.stop()

    web_app.cleanup_ctx.append(lifecycle)
    return signoff


def _assist(settings: Settings, service: Service, agent: AgentRuntime, metrics: Metrics, clock: Clock) -> Assist | None:
    if not settings.anthropic_api_key:
        return None
    model = Claude(api_key=settings.anthropic_api_key, base_url=settings.anthropic_base_url,
                   model=settings.note_model or settings.anthropic_model, timeout=settings.note_timeout_seconds)
    return Assist(service, model, metrics, clock, runs=agent.runs)


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
