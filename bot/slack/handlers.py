"""Bolt listeners: ack, parse, delegate. No business logic lives here."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.errors import SlackApiError

from bot.slack import blocks
from bot.slack.duties import CONFIRM_VIEW
from bot.slack.interactions import Interactions
from bot.slack.listener_errors import tell_failure, told_on_failure
from bot.slack.payloads import BadPayload, Click, extract_click, extract_submission
from bot.slack.stats_blocks import stats_message

if TYPE_CHECKING:
    from bot.slack.timer_buttons import TimerInteractions
    from bot.slack.home import Home

log = logging.getLogger(__name__)

HELP = (
    "*Signoff* puts a person between an AI agent and its risky actions.\n"
    "Agents ask over the API; approval cards appear in the channel they name.\n"
    "• `/signoff pending`: the requests waiting on you\n"
    "• `/signoff stats` / `/signoff stats all`: how long people took to decide, last 7 days (this channel / all)\n"
    "• `/signoff run <task>`: start an agent run in this channel (it works in the run's thread)\n"
    "• `/signoff grants`: standing grants (\"Approve & remember\"), with Revoke\n"
    "• `/signoff away until 2026-12-24 to U0123ABCD` / `/signoff back`: a delegate decides while you are away\n"
    "• `/signoff help`: this message"
)


DirectClick = Callable[[Click], Coroutine[Any, Any, None]]


def direct_clicks(interactions: Interactions) -> dict[str, DirectClick]:
    """Buttons whose listener reads nothing but the click, so `web.slack_events` runs it without
    Bolt (a click's dispatch through Bolt cost more than its decision): the same work `on_approve`
    does after its ack. Every other interaction, and every payload `extract_click` refuses, goes
    through Bolt and the listeners below."""
    return {blocks.APPROVE: told_on_failure(interactions.approve, interactions.tell)}


def register(
    app: AsyncApp, interactions: Interactions, *, timers: TimerInteractions | None = None, home: Home | None = None
) -> None:
    async def on_error(error: Exception, body: dict[str, Any]) -> None:
        await tell_failure(interactions.tell, body, error)

    app.error(on_error)

    async def on_approve(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        click = await _click_or_refuse(body)
        if click is not None:
            await interactions.approve(click)

    async def on_approve_confirm(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        click = await _click_or_refuse(body)
        if click is not None:
            await interactions.approve(click, opens_view=True)

    async def on_edit(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        click = await _click_or_refuse(body)
        if click is not None:
            await interactions.open_modal(click, "edit")

    async def on_reject(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        click = await _click_or_refuse(body)
        if click is not None:
            await interactions.open_modal(click, "reject")

    async def on_respond(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        click = await _click_or_refuse(body)
        if click is not None:
            await interactions.open_modal(click, "respond")

    async def on_undo(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        click = await _click_or_refuse(body)
        if click is not None:
            await interactions.undo(click)

    async def on_submit(ack: AsyncAck, body: dict[str, Any]) -> None:
        try:
            sub = extract_submission(body)
        except BadPayload as exc:
            await ack(response_action="errors", errors={_first_block(body): str(exc)})
            return
        request, params, errors = await interactions.check_submission(sub)
        if errors or request is None:
            await ack(response_action="errors", errors=errors)
            return
        await ack()
        await interactions.finish_submission(sub, request, params)

    async def on_command(ack: AsyncAck, command: dict[str, Any]) -> None:
        words = (command.get("text") or "").strip().lower().split()
        if words[:1] == ["stats"]:  # one indexed read of 7 days (bot/approvals/stats.py): fast enough for the ack
            channel = None if words[1:2] in (["all"], ["workspace"]) else command.get("channel_id")
            summary = await interactions.service.stats.last_week(str(channel) if channel else None)
            await ack(**stats_message(summary))
            return
        if home is not None and (command.get("text") or "").strip().lower() == "pending" and command.get("user_id"):
            await ack(**await home.pending(str(command["user_id"])))  # a database read: fast enough for the ack
            return
        await ack(text=HELP, response_type="ephemeral")

    async def _click_or_refuse(body: dict[str, Any]) -> Click | None:
        try:
            return extract_click(body)
        except BadPayload as exc:
            user = (body.get("user") or {}).get("id")
            channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
            if user:
                await interactions.tell(user, channel, f"That button could not be used: {exc}. Nothing was changed.")
            return None

    app.action(blocks.APPROVE)(on_approve)
    app.action(blocks.APPROVE_CONFIRM)(on_approve_confirm)
    app.action(blocks.EDIT)(on_edit)
    app.action(blocks.REJECT)(on_reject)
    app.action(blocks.UNDO)(on_undo)
    app.view(blocks.EDIT_VIEW)(on_submit)
    app.view(blocks.REJECT_VIEW)(on_submit)
    app.action(blocks.RESPOND)(on_respond)
    app.view(blocks.RESPOND_VIEW)(on_submit)
    app.view(CONFIRM_VIEW)(on_submit)
    app.command("/signoff")(on_command)
    if timers is not None:
        _register_timers(app, interactions, timers, _click_or_refuse)
    if home is not None:
        _register_home(app, home)


def _register_timers(
    app: AsyncApp, interactions: Interactions, timers: TimerInteractions,
    click_of: Callable[[dict[str, Any]], Awaitable[Click | None]],
) -> None:
    from bot.slack.timer_buttons import ESCALATE_VIEW, TARGET_BLOCK

    async def on_snooze(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        click = await click_of(body)
        if click is not None:
            await timers.snooze(click)

    async def on_escalate(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        click = await click_of(body)
        if click is not None:
            await timers.open_modal(click)  # views.open straight from the listener: trigger_id lives 3 s

    async def on_escalate_submit(ack: AsyncAck, body: dict[str, Any]) -> None:
        try:
            sub = extract_submission(body)
        except BadPayload as exc:
            await ack(response_action="errors", errors={TARGET_BLOCK: str(exc)})
            return
        choice, errors = await timers.check_submission(sub)
        if errors or choice is None:
            await ack(response_action="errors", errors=errors or {TARGET_BLOCK: "Pick where the request goes."})
            return
        await ack()
        await timers.finish_submission(sub, choice)

    app.action(blocks.SNOOZE)(on_snooze)
    app.action(blocks.ESCALATE)(on_escalate)
    app.view(ESCALATE_VIEW)(on_escalate_submit)


def _register_home(app: AsyncApp, home: Home) -> None:
    async def on_home_opened(event: dict[str, Any]) -> None:
        if event.get("tab", "home") == "home" and event.get("user"):
            await home.opened(str(event["user"]))

    async def on_mention(event: dict[str, Any], client: Any) -> None:
        """@signoff in a channel: what waits on the person who asked, shown to them alone (like
        `/signoff pending`)."""
        user, channel = event.get("user"), event.get("channel")
        if not user or not channel or event.get("bot_id"):
            return
        answer = await home.pending(str(user))
        thread = {"thread_ts": event["thread_ts"]} if event.get("thread_ts") else {}
        try:
            await client.chat_postEphemeral(channel=channel, user=user, text=answer["text"],
                                            blocks=answer.get("blocks"), **thread)
        except SlackApiError as exc:  # e.g. a channel the bot may not post in: nothing to undo
            log.warning("could not answer a mention in %s: %s", channel, exc.response.get("error"))

    app.event("app_home_opened")(on_home_opened)
    app.event("app_mention")(on_mention)


def _first_block(body: dict[str, Any]) -> str:
    values = ((body.get("view") or {}).get("state") or {}).get("values") or {}
    return next(iter(values), "reason")
