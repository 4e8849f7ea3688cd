"""Slack's listeners wired into Bolt: two Bolt apps with the same listeners, in the order they must match.

`clicks` runs a listener to its end: bot/process/slack_endpoint.py acks clicks and events itself and
answers modals and commands when their listener calls ack(), and the backlog and a graceful stop must
know when the work is done. `bolt` is Bolt's usual (ack first, listener in a task of its own):
url_verification, and all of Socket Mode.
"""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.agent.app import AgentRuntime
from bot.approvals.grants import Grants
from bot.approvals.history import HistorySuggestions
from bot.process.settings import Settings
from bot.slack import batch, elicit_handlers, grant_handlers, handlers, history_handlers, similar_handlers, suggestion_handlers
from bot.slack.batch import BatchInteractions
from bot.slack.elicit_handlers import ElicitInteractions
from bot.slack.grant_handlers import GrantInteractions
from bot.slack.history_handlers import HistoryInteractions
from bot.slack.home import Home
from bot.slack.interactions import Interactions
from bot.slack.similar_handlers import SimilarInteractions
from bot.slack.suggestion_handlers import SuggestionInteractions
from bot.slack.team import InstalledTeam
from bot.slack.timer_buttons import TimerInteractions


def bolt_apps(settings: Settings, client: AsyncWebClient, team: InstalledTeam) -> tuple[AsyncApp, AsyncApp]:
    """(`bolt`, `clicks`): Bolt's usual app, and the one whose listeners run to their end."""
    bolt, clicks = (
        AsyncApp(
            # Named: without a name Bolt takes its caller's file name from inspect.stack(), which reads the
            # source of every frame on the stack (a tenth of a second of each process's start-up).
            name=name,
            client=client,
            signing_secret=settings.slack_signing_secret or "socket-mode-has-no-signing-secret",
            request_verification_enabled=not settings.socket_mode,
            process_before_response=inline,
        )
        for name, inline in (("signoff", False), ("signoff-clicks", True))
    )
    bolt.use(team.middleware())  # Socket Mode's requests reach Bolt directly; HTTP's are checked in slack_events
    return bolt, clicks


def register(apps: tuple[AsyncApp, ...], *, agent: AgentRuntime, interactions: Interactions,
             timers: TimerInteractions, grant_interactions: GrantInteractions, grants: Grants, home: Home,
             history: HistorySuggestions) -> None:
    """Every listener, on each of `apps`."""
    for app in apps:
        agent.register(app)  # before the core listeners: `/signoff run ...` must match first
        grant_handlers.register(app, grant_interactions)  # `/signoff grants|away|back` too
        suggestion_handlers.register(app, SuggestionInteractions(interactions, grants))  # "Approve & always allow"
        elicit_handlers.register(app, ElicitInteractions(interactions))  # an MCP server's form, answered in Slack
        history_handlers.register(app, HistoryInteractions(interactions, history, home))  # suggestions from history
        similar_handlers.register(app, SimilarInteractions(interactions))  # Review each / Approve all / Reject all
        handlers.register(app, interactions, timers=timers, home=home)
        batch.register(app, BatchInteractions(interactions))
