"""The running process: every part one Signoff process runs (`Signoff`), started and stopped in order.

`start` starts the background parts (the click backlog, Slack's stored inputs and their replay, the
cross-process watcher, the outbox dispatcher, the agent runner, the timers' sweep, Socket Mode);
`stop` lets acked clicks finish before it stops them in the reverse order and closes the sessions
and the store. bot/process/app.py builds it; its routes find it under `SIGNOFF`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.signature import SignatureVerifier

from bot.agent.app import AgentRuntime
from bot.approvals.assist import Assist
from bot.approvals.service import Service
from bot.approvals.timers import Timers
from bot.approvals.foreign_changes import CrossProcessWatcher
from bot.outbox.dispatcher import Dispatcher
from bot.policy.holder import PolicyHolder
from bot.process.jobs import SweepJob
from bot.process.metrics import Metrics
from bot.process.settings import Settings
from bot.slack.backlog import Backlog
from bot.slack.directory import SlackDirectory
from bot.slack.failures import SlackHealth, connect_socket_mode
from bot.slack.handlers import DirectClick
from bot.slack.received import SlackInbox
from bot.slack.team import InstalledTeam
from storage.sql import SqlStore

if TYPE_CHECKING:
    from bot.slack.socket_intake import DurableSocketMode, Intake

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
    assist: Assist | None = None  # AI notes and thread answers (bot/approvals/assist.py)
    socket_intake: Intake | None = None  # Socket Mode's requests stored before their ack (bot/process/slack_endpoint.py)

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
            from bot.slack.socket_intake import DurableSocketMode, Intake

            self.socket_handler = DurableSocketMode(self.bolt, self.settings.slack_app_token)
            self.socket_handler.intake = self.socket_intake
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
        if self.assist is not None:
            await self.assist.close()
        await self.dispatcher.stop()
        await self.watcher.stop()
        if isinstance(self.service.directory, SlackDirectory):
            await self.service.directory.close()
        await self.http.close()
        if self.egress_http is not None:
            await self.egress_http.close()
        await self.store.close()
