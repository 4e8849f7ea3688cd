"""Agent runs in Slack, the listeners (the outbox handlers for the run's messages are in
bot/agent/slack_outbox.py).

Listeners (thin: ack, parse, delegate): Cancel on the root message, question buttons and
their Submit, `/signoff run <task>`, and `message` events in threads (answers or
interventions), deduplicated by `event_id` because Slack retries events.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.agent import blocks
from bot.domain.questions import answers_from_choices, questions_of
from bot.agent.run_service import NOT_ASKED, RunService
from bot.approvals.access import PRE_ACK_LOOKUP_SECONDS, GroupsUnknown, bounded
from bot.agent.access import RunAccess
from bot.process.clock import Clock
from bot.domain.model import Actor, Kind, Request, Via
from bot.domain.runs import NewRun, Run, RunStatus, slack_command_key
from bot.errors import NotFound
from bot.process.metrics import Metrics
from bot.approvals.assist import Assist
from bot.approvals.service import Service
from bot.domain.assist import looks_like_question
from bot.slack.interactions import already_decided_text, tell
from bot.slack.listener_errors import failure_text
from bot.slack.payloads import REQUEST_ID, BadPayload, Click, extract_click
from bot.slack.text import from_slack, groups_unknown_text

log = logging.getLogger(__name__)

RUN_COMMAND = re.compile(r"^\s*run\b\s*(.*)$", re.IGNORECASE | re.DOTALL)
_ANSWER = re.compile(rf"^{blocks.ANSWER_PREFIX}(\d+)_(\d+)$")
_PICK = re.compile(rf"^{blocks.PICK_PREFIX}\d+$")
_HUMAN_SUBTYPES = (None, "thread_broadcast", "file_share")


# --------------------------------------------------------------------------- listeners


class RunInteractions:
    def __init__(self, service: Service, run_service: RunService, client: AsyncWebClient, clock: Clock,
                 metrics: Metrics, *, default_agent: str, access: RunAccess | None = None) -> None:
        self.access = access or RunAccess()
        self.service = service
        self.run_service = run_service
        self.client = client
        self.clock = clock
        self.metrics = metrics
        self.default_agent = default_agent
        self.unavailable: str | None = None  # why runs cannot start here (no model key), said to whoever asks
        self.assist: Assist | None = None  # Claude's answers to questions in a card's thread (ANTHROPIC_API_KEY)
        self._names: dict[str, str | None] = {}

    async def tell(self, user: str, channel: str | None, text: str, thread_ts: str | None = None) -> None:
        await tell(self.client, self.metrics, user, channel, text, thread_ts)

    def _members(self) -> Any:
        return self.service.directory.group_members if self.service.directory is not None else None

    async def may_start(self, user_id: str) -> bool:
        """Checked before the command's ack: a user group's lookup gets PRE_ACK_LOOKUP_SECONDS."""
        return await self.access.may_start(user_id, bounded(self._members(), PRE_ACK_LOOKUP_SECONDS))

    async def cancel(self, click: Click) -> None:
        known = await self.run_service.find(click.request_id)
        if known is not None and known.root_ts and click.message_ts and click.view_id is None and (
                click.message_ts != known.root_ts or (click.channel_id and click.channel_id != known.channel)):
            await self.tell(click.user_id, click.channel_id,
                            "This button does not belong to the message it was clicked on. Nothing was changed.")
            return
        try:
            may_write = known is None or await self.access.may_write(known, click.user_id, self._members())
        except GroupsUnknown as exc:
            await self.tell(click.user_id, click.channel_id, groups_unknown_text(exc, "click"))
            return
        if not may_write:
            await self.tell(click.user_id, click.channel_id,
                            "You may not cancel this run (only its starter and the people named to supervise "
                            "runs may). Nothing was changed.")
            return
        try:
            run, asked = await self.run_service.cancel(click.request_id, by=click.user_id)
        except NotFound:
            await self.tell(click.user_id, click.channel_id, "That run does not exist. Nothing was changed.")
            return
        if not asked:
            state = "is already being cancelled" if run.cancel_requested else f"has already {run.status.value}"
            await self.tell(click.user_id, click.channel_id, f"This run {state}. Nothing was changed.")

    async def _taking_over(self, click: Click) -> Run | None:
        """The failed run a take-over button names, if this person may take it over (else they are told)."""
        run = await self.run_service.find(click.request_id)
        refusal = None
        if run is None:
            refusal = "That run does not exist. Nothing was changed."
        elif click.view_id is None and click.message_ts and (
                click.message_ts != run.root_ts or (click.channel_id and click.channel_id != run.channel)):
            refusal = "This button does not belong to the message it was clicked on. Nothing was changed."
        elif run.status is not RunStatus.FAILED:
            refusal = f"This run has {run.status.value} already: there is nothing to take over. Nothing was changed."
        else:
            try:
                if not await self.access.may_write(run, click.user_id, self._members()):
                    refusal = ("You may not take this run over (only its starter and the people named to "
                               "supervise runs may). Nothing was changed.")
            except GroupsUnknown as exc:
                refusal = groups_unknown_text(exc, "click")
        if refusal is not None:
            await self.tell(click.user_id, click.channel_id, refusal)
            return None
        return run

    async def retry(self, click: Click, seen: int | None, correction: str | None = None) -> None:
        """Retry / the Correct and retry form's submit: the run goes on (one of two clicks at once).
        `seen`: the failure the buttons were shown for (bot.agent.blocks.taken_over_at)."""
        if await self._taking_over(click) is None:
            return
        if seen is None:
            await self.tell(click.user_id, click.channel_id, "That button could not be used: it does not say which "
                            "failure it is for. Nothing was changed.")
            return
        run, retried = await self.run_service.retry(click.request_id, by=click.user_id, by_name=click.user_name,
                                                    correction=correction, seen=seen)
        if not retried:
            await self.tell(click.user_id, click.channel_id, "Someone took this run over already (it is "
                            f"{run.status.value} now). Nothing was changed.")

    async def open_correction(self, click: Click) -> None:
        run = await self._taking_over(click)
        if run is None or not click.trigger_id:
            return
        try:
            await self.client.views_open(trigger_id=click.trigger_id, view=blocks.correct_modal(run))
        except (SlackApiError, aiohttp.ClientError, asyncio.TimeoutError):
            log.warning("could not open the correction form of run %s", run.id, exc_info=True)
            await self.tell(click.user_id, click.channel_id,
                            "Slack did not open the form in time. Click *Correct and retry* again.")

    async def give_up(self, click: Click) -> None:
        if await self._taking_over(click) is None:
            return
        run, closed = await self.run_service.give_up(click.request_id, by=click.user_id)
        if not closed:
            await self.tell(click.user_id, click.channel_id, f"This run is {run.status.value} now. Nothing was changed.")

    async def _question(self, click: Click) -> Request | None:
        request = await self.service.reads.request(click.request_id)
        refusal = None
        if request is None or request.kind is not Kind.QUESTION:
            refusal = "This question does not exist. Nothing was changed."
        elif request.card_ts and click.message_ts and click.message_ts != request.card_ts:
            refusal = "This button does not belong to the card it was clicked on. Nothing was changed."
        elif not request.is_pending:
            refusal = already_decided_text(request)
        else:  # the same check the answer is written on (NOT_ASKED, or why Slack's groups left it open)
            refusal = await self.run_service.asked(click.user_id)(request)
        if refusal is not None:
            await self.tell(click.user_id, click.channel_id, refusal)
            return None
        return request

    async def answer_click(self, click: Click) -> None:
        match = _ANSWER.match(click.action_id)
        request = await self._question(click)
        if request is None or match is None:
            return
        question, option = int(match.group(1)), int(match.group(2))
        await self._answer(click, request, {question: [option]})

    async def answer_submit(self, click: Click, state: dict[str, Any]) -> None:
        request = await self._question(click)
        if request is None:
            return
        choices: dict[int, list[int]] = {}
        for i, _question in enumerate(questions_of(request)):
            value = (state.get(f"{blocks.QUESTION_BLOCK_PREFIX}{i}") or {}).get(f"{blocks.PICK_PREFIX}{i}") or {}
            picked = value.get("selected_options") or ([value["selected_option"]] if value.get("selected_option") else [])
            choices[i] = [int(o["value"]) for o in picked if str(o.get("value", "")).isdigit()]
        missing = [str(i + 1) for i, chosen in choices.items() if not chosen]
        if missing:
            await self.tell(click.user_id, click.channel_id,
                            f"Please choose an answer for question {', '.join(missing)} (or reply in the thread).")
            return
        await self._answer(click, request, choices)

    async def _answer(self, click: Click, request: Request, choices: dict[int, list[int]]) -> None:
        result = await self.run_service.answer(request, answers_from_choices(request, choices),
                                               actor=Actor(click.user_id, click.user_name), via=Via.BUTTON,
                                               recheck=self.run_service.asked(click.user_id))
        if result.refused is not None:
            await self.tell(click.user_id, click.channel_id, result.refused)
        elif not result.won:
            await self.tell(click.user_id, click.channel_id, already_decided_text(result.request))

    async def message(self, event: dict[str, Any], event_id: str | None) -> None:
        thread_ts, ts, user = event.get("thread_ts"), event.get("ts"), event.get("user")
        if (event.get("subtype") not in _HUMAN_SUBTYPES or event.get("bot_id") or not thread_ts
                or thread_ts == ts or not user or not isinstance(event.get("text"), str)):
            return
        channel = str(event.get("channel"))
        text = from_slack(event["text"])
        if (self.assist is not None and looks_like_question(text)
                and await self._asked(channel, str(thread_ts), str(user), text, str(ts))):
            return
        reply = await self.run_service.thread_reply(
            channel=channel, thread_ts=str(thread_ts), user_id=str(user), user_name=await self._name(str(user)),
            text=text, ts=ts, event_id=event_id,
        )
        if reply.kind == "intervention":
            await self.tell(str(user), channel, "Noted: the agent gets your message at its next step.", str(thread_ts))
        elif reply.kind == "failed":
            await self.tell(str(user), channel, failure_text("message"), str(thread_ts))
        elif reply.kind == "refused" and reply.refused not in (None, NOT_ASKED):
            await self.tell(str(user), channel, str(reply.refused), str(thread_ts))
        elif reply.kind == "refused":
            await self.tell(str(user), channel, "You are not one of the people asked, so your reply was not "
                            "taken as the answer.", str(thread_ts))
        elif reply.kind == "not_writer":
            await self.tell(str(user), channel, "You may not write to this run (only its starter and the people "
                            "named to supervise runs may), so the agent will not read this.", str(thread_ts))
        elif reply.kind == "ended" and reply.run is not None:
            await self.tell(str(user), channel, f"This run has {reply.run.status.value}: the agent will not read "
                            "this. Start a new one with `/signoff run <task>`.", str(thread_ts))
        elif reply.kind == "answer" and reply.request is not None and reply.request.decision is not None:
            decided = reply.request.decision
            if decided.decided_by is None or decided.decided_by.id != user or decided.via is not Via.THREAD:
                await self.tell(str(user), channel, already_decided_text(reply.request), str(thread_ts))

    async def _asked(self, channel: str, thread_ts: str, user: str, text: str, ts: str) -> bool:
        """A person's question in a pending card's thread: Claude answers it (bot/approvals/assist.py).
        False: the thread is not a pending card's or is the agent's, and the message goes on as before."""
        assert self.assist is not None
        request = await self.assist.asked_about(channel, thread_ts)
        if request is None:
            return False
        try:
            may = await self.service.may_decide(request, user)
        except GroupsUnknown as exc:
            await self.tell(user, channel, groups_unknown_text(exc, "message"), thread_ts)
            return True
        if not may:
            if isinstance(request.extra.get("run_id"), str):
                return False  # in a run's thread: a message to the run, as before (bot/agent/run_service.py)
            await self.tell(user, channel, "Only the people asked to decide this request get AI answers about it.",
                            thread_ts)
            return True
        self.assist.answer_later(request, text, user_id=user, channel=channel, thread_ts=thread_ts, ts=ts)
        return True

    async def _name(self, user_id: str) -> str | None:
        if user_id not in self._names:
            try:
                info = (await self.client.users_info(user=user_id)).get("user") or {}
                self._names[user_id] = info.get("name") or info.get("real_name")
            except (SlackApiError, aiohttp.ClientError, asyncio.TimeoutError):  # a name is nice to have
                log.warning("could not look up the name of %s", user_id, exc_info=True)
                return None
        return self._names[user_id]

    async def start_run(self, command: dict[str, Any], task: str) -> None:
        """After the ack said "starting": if the run cannot be stored, the person who asked hears why."""
        new = NewRun(task=task, channel=command["channel_id"], agent=self.default_agent,
                     requested_by=command.get("user_id"))
        trigger = command.get("trigger_id")
        try:
            if isinstance(trigger, str) and trigger:
                # Keyed on Slack's id for the command: the stored command replayed after a crash that came
                # between the run's commit and its row's done mark (bot/slack/received.py) finds the run
                # started, and starts no second one.
                _, started = await self.run_service.start_keyed(
                    new, slack_command_key(str(command.get("team_id") or ""), trigger))
                if not started:
                    log.info("/signoff run %s was started before (a replayed command): not started again", trigger)
            else:
                await self.run_service.start(new)
        except Exception as exc:
            log.exception("could not start a run from /signoff run")
            user = command.get("user_id")
            if user:
                await self.tell(str(user), command.get("channel_id"),
                                f"The agent run could not be started ({type(exc).__name__}; the details are in "
                                "Signoff's log). Nothing was run.")


def register(app: AsyncApp, interactions: RunInteractions) -> None:
    """Register the run listeners. Call before `bot.slack.handlers.register`: `/signoff run` goes first."""

    async def clicked(body: dict[str, Any]) -> Click | None:
        try:
            return extract_click(body)
        except BadPayload as exc:
            user = (body.get("user") or {}).get("id")
            if user:
                channel = (body.get("channel") or {}).get("id")
                await interactions.tell(user, channel, f"That button could not be used: {exc}. Nothing was changed.")
            return None

    async def on_cancel(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        click = await clicked(body)
        if click is not None:
            await interactions.cancel(click)

    async def on_answer(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        click = await clicked(body)
        if click is not None:
            await interactions.answer_click(click)

    async def on_submit(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        click = await clicked(body)
        if click is not None:
            await interactions.answer_submit(click, (body.get("state") or {}).get("values") or {})

    async def on_pick(ack: Any) -> None:
        await ack()  # choices are read from the message's state when Submit is clicked

    async def is_run(body: dict[str, Any]) -> bool:
        return bool(RUN_COMMAND.match(str(body.get("text") or "")))

    async def on_run(ack: Any, command: dict[str, Any]) -> None:
        task = RUN_COMMAND.match(str(command.get("text") or ""))
        text = from_slack(task.group(1)).strip() if task else ""
        if not text:
            await ack(text="Usage: `/signoff run <what the agent should do>`", response_type="ephemeral")
            return
        if interactions.unavailable:
            await ack(text=interactions.unavailable, response_type="ephemeral")
            return
        try:
            may_start = await interactions.may_start(str(command.get("user_id") or ""))
        except GroupsUnknown as exc:
            await ack(text=groups_unknown_text(exc, "command"), response_type="ephemeral")
            return
        if not may_start:
            await ack(text="You may not start agent runs here (SIGNOFF_RUN_STARTERS). Nothing was started.",
                      response_type="ephemeral")
            return
        await ack(text="Starting an agent run; follow it in the thread of its message.", response_type="ephemeral")
        await interactions.start_run(command, text)

    async def on_message(event: dict[str, Any], body: dict[str, Any]) -> None:
        await interactions.message(event, body.get("event_id"))

    def seen(body: dict[str, Any]) -> int | None:
        actions = body.get("actions") or [{}]
        return blocks.taken_over_at(actions[0].get("block_id") if isinstance(actions[0], dict) else None)

    async def on_retry(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        click = await clicked(body)
        if click is not None:
            await interactions.retry(click, seen(body))

    async def on_correct(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        click = await clicked(body)
        if click is not None:  # views.open straight away: the trigger_id lives 3 s
            await interactions.open_correction(click)

    async def on_correct_submit(ack: Any, body: dict[str, Any]) -> None:
        view = body.get("view") or {}
        run_id = str(view.get("private_metadata") or "")
        value = (((view.get("state") or {}).get("values") or {}).get(blocks.CORRECT_BLOCK) or {}).get(
            blocks.CORRECT_INPUT) or {}
        text = from_slack(str(value.get("value") or "")).strip()
        if not text:
            await ack(response_action="errors", errors={blocks.CORRECT_BLOCK: "Write what the agent should do differently."})
            return
        if len(text) > blocks.CORRECTION_MAX:
            await ack(response_action="errors",
                      errors={blocks.CORRECT_BLOCK: f"At most {blocks.CORRECTION_MAX} characters."})
            return
        await ack()
        user = body.get("user") or {}
        run_id, _, seen = run_id.partition(":")
        if not isinstance(user.get("id"), str) or not REQUEST_ID.match(run_id) or not seen.isdigit():
            log.warning("a correction form without a run id or a user was submitted; ignored")
            return
        click = Click(user_id=user["id"], user_name=user.get("username") or user.get("name"),
                      action_id=blocks.CORRECT_VIEW, request_id=run_id, trigger_id=None, channel_id=None,
                      message_ts=None, view_id=str(view.get("id") or "V"))
        await interactions.retry(click, int(seen), correction=text)

    async def on_give_up(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        click = await clicked(body)
        if click is not None:
            await interactions.give_up(click)

    app.action(blocks.CANCEL_RUN)(on_cancel)
    app.action(blocks.RETRY_RUN)(on_retry)
    app.action(blocks.CORRECT_RUN)(on_correct)
    app.action(blocks.CLOSE_RUN)(on_give_up)
    app.view(blocks.CORRECT_VIEW)(on_correct_submit)
    app.action(blocks.ANSWER_SUBMIT)(on_submit)
    app.action(_ANSWER)(on_answer)
    app.action(_PICK)(on_pick)
    app.command("/signoff", matchers=[is_run])(on_run)
    app.event("message")(on_message)
