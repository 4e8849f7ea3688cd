"""What happens when a person clicks a card button or submits a modal.

Listeners in `handlers.py` ack first and then call in here. Every refusal is a
clear ephemeral message (or an inline modal error) and writes nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from dataclasses import dataclass
from collections.abc import Coroutine
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.clock import Clock
from bot.domain.edits import compute_changes
from bot.domain.model import Actor, Kind, Outcome, Request, Via
from bot.metrics import Metrics
from bot.service import Service
from bot.slack import blocks
from bot.slack.payloads import Click, Submission

log = logging.getLogger(__name__)

_OUTCOME_WORDS = {
    "approved": "approved",
    "rejected": "rejected",
    "expired": "expired",
    "cancelled": "cancelled",
    "answered": "answered",
}


DECIDING_AT_ONCE = 4


@dataclass(frozen=True)
class Refusal:
    text: str


def already_decided_text(request: Request) -> str:
    decision = request.decision
    word = _OUTCOME_WORDS.get(request.status.value, request.status.value)
    if decision is None:
        return f"This request was already {word}."
    who = f"<@{decision.decided_by.id}>" if decision.decided_by else {
        "timeout": "timeout", "policy": "policy", "api": "the agent"}.get(decision.via.value, "Signoff")
    when = f"<!date^{int(decision.decided_at.timestamp())}^{{date_short_pretty}} at {{time}}|{decision.decided_at:%Y-%m-%d %H:%M} UTC>"
    return f"Already {word} by {who} ({when}). Nothing was changed."


async def tell(client: AsyncWebClient, metrics: Metrics, user_id: str, channel: str | None, text: str,
               thread_ts: str | None = None) -> None:
    """An ephemeral note to one person (a DM when there is no channel, e.g. a click in App Home)."""
    try:
        if channel:
            await client.chat_postEphemeral(channel=channel, user=user_id, text=text, thread_ts=thread_ts)
        else:
            await client.chat_postMessage(channel=user_id, text=text)
    except SlackApiError as exc:
        method = "chat.postEphemeral" if channel else "chat.postMessage"
        metrics.slack_api_errors.labels(method, str(exc.response.get("error"))).inc()
        log.warning("could not tell %s: %s", user_id, exc.response.get("error"))
    except (aiohttp.ClientError, TimeoutError) as exc:  # a note is best effort: Slack down or slow
        metrics.slack_api_errors.labels("chat.postEphemeral" if channel else "chat.postMessage", "connection").inc()
        log.warning("could not tell %s: %s: %s", user_id, type(exc).__name__, exc)


class Interactions:
    def __init__(self, service: Service, client: AsyncWebClient, clock: Clock, metrics: Metrics) -> None:
        self.service = service
        self.client = client
        self.clock = clock
        self.metrics = metrics
        self._deciding = asyncio.Semaphore(DECIDING_AT_ONCE)
        self._notes: set[asyncio.Task[None]] = set()  # ephemeral notes still being posted

    # -- checks shared by every interaction ----------------------------------

    async def _check(
        self, request_id: str, user_id: str, click: Click | None = None, *, authorize: bool = True
    ) -> Request | Refusal:
        request = await self.service.store.get_request(request_id)
        if request is None:
            return Refusal("This card points to a Signoff request that does not exist. Nothing was changed.")
        if click is not None and request.card_ts and click.message_ts and click.view_id is None:
            if click.message_ts != request.card_ts or (click.channel_id and click.channel_id != request.card_channel):
                return Refusal("This button does not belong to the card it was clicked on. Nothing was changed.")
        if not request.is_pending:
            return Refusal(already_decided_text(request))
        if request.kind is not Kind.APPROVAL:
            return Refusal("This is a question, not an approval: answer it in its thread. Nothing was changed.")
        if authorize and not await self.service.may_decide(request, user_id):
            if user_id in (request.extra.get("not_by") or ()):
                return Refusal("You started this agent run, so someone else approves its actions. "
                               "Your click was not recorded.")
            escalated = _escalated_to(request)
            if escalated:  # a late click from someone the request moved away from
                return Refusal(f"This request was escalated to {escalated}, and you are no longer one of its "
                               "approvers, so your click was not recorded. " + _approvers_text(request))
            return Refusal(
                "You are not one of the approvers of this request, so your click was not recorded. "
                + _approvers_text(request)
            )
        return request

    async def check(self, request_id: str, user_id: str, click: Click | None = None) -> Request | Refusal:
        """The pending request if `user_id` may act on it from `click`, else why not (for other modules)."""
        return await self._check(request_id, user_id, click)

    async def tell(self, user_id: str, channel: str | None, text: str, thread_ts: str | None = None) -> None:
        await tell(self.client, self.metrics, user_id, channel, text, thread_ts)

    # -- buttons -------------------------------------------------------------

    async def approve(self, click: Click) -> None:
        # A burst of clicks waits here, using no CPU, rather than all at once: the event loop stays
        # free to answer the next clicks' acks promptly (Slack's 3 s), while decisions go at full speed.
        async with self._deciding:
            note = await self._approve(click)
        if note is not None:
            # After the slot is released, and in the background: a slow or rate-limited Slack (with
            # its retries) delays only this person's note, never someone else's decision.
            self.later(self.tell(click.user_id, click.channel_id, note))

    def later(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._notes.add(task)
        task.add_done_callback(self._notes.discard)

    async def _approve(self, click: Click) -> str | None:
        """Decide; returns the note to tell the clicker, if any (the caller posts it)."""
        checked = await self._check(click.request_id, click.user_id, click)
        if isinstance(checked, Refusal):
            return checked.text
        result = await self.service.decide(
            checked.id, Outcome.APPROVED, via=Via.BUTTON, actor=Actor(click.user_id, click.user_name), read=checked
        )
        if not result.won:
            return already_decided_text(result.request)
        if _escalated_to(checked) and click.user_id not in (checked.timers.escalated_to if checked.timers else ()):
            return (f"Approved. This request had been escalated to {_escalated_to(checked)}; your decision "
                    "counts because you are still one of its approvers.")
        return None

    async def open_modal(self, click: Click, kind: str) -> None:
        checked = await self._check(click.request_id, click.user_id, click)
        if isinstance(checked, Refusal):
            await self.tell(click.user_id, click.channel_id, checked.text)
            return
        view = blocks.edit_modal(checked) if kind == "edit" else blocks.reject_modal(checked)
        view["private_metadata"] = json.dumps(
            {"request_id": checked.id, "version": checked.version, "channel": click.channel_id,
             "message_ts": click.message_ts}
        )
        try:
            await self.client.views_open(trigger_id=click.trigger_id, view=view)
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            why = str(exc.response.get("error")) if isinstance(exc, SlackApiError) else "connection"
            self.metrics.slack_api_errors.labels("views.open", why).inc()
            log.warning("views.open failed for %s: %s", checked.id, why)
            await self.tell(
                click.user_id, click.channel_id,
                "Slack could not open the form (it took too long). Please click again.",
            )

    # -- modal submissions: validation happens before the ack ------------------

    async def check_submission(self, sub: Submission) -> tuple[Request | None, dict[str, Any], dict[str, str]]:
        """(request, edited params, inline errors) for a submitted form; errors mean nothing is written.

        Runs before the ack, so it reads only our database; whether the person may decide can
        need a Slack call (user groups) and is checked after the ack, in `finish_submission`.
        """
        first_block = "reason" if sub.callback_id == blocks.REJECT_VIEW else next(iter(sub.values), "reason")
        oversize = _oversize_inputs(sub.values)
        if oversize:
            return None, {}, oversize
        checked = await self._check(sub.request_id, sub.user_id, authorize=False)
        if isinstance(checked, Refusal):
            return None, {}, {first_block: _plain(checked.text)}
        if sub.message_ts and checked.card_ts and (sub.message_ts != checked.card_ts or (
                sub.channel_id and checked.card_channel and sub.channel_id != checked.card_channel)):
            # The form was opened from another card than this request's: its metadata was tampered with.
            return None, {}, {first_block: "This form does not belong to that request. Nothing was changed."}
        if sub.callback_id == blocks.EDIT_VIEW:
            params, errors = blocks.parse_edit_submission(checked, sub.values)
            return (None, {}, errors) if errors else (checked, params, {})
        return checked, checked.action.params, {}

    async def finish_submission(self, sub: Submission, request: Request, params: dict[str, Any]) -> None:
        actor = Actor(sub.user_id, sub.user_name)
        channel = sub.channel_id or request.card_channel
        if not await self.service.may_decide(request, sub.user_id):
            await self.tell(sub.user_id, channel, "You are not one of the approvers of this request, so your "
                            "answer was not recorded. " + _approvers_text(request))
            return
        if sub.callback_id == blocks.EDIT_VIEW:
            changes = compute_changes(request.action.params, params)
            result = await self.service.decide(
                request.id, Outcome.APPROVED, via=Via.MODAL, actor=actor, params=params, changes=changes
            )
        else:
            reason = blocks.parse_reject_submission(sub.values)
            result = await self.service.decide(request.id, Outcome.REJECTED, via=Via.MODAL, actor=actor,
                                               comment=reason)
        if not result.won:
            await self.tell(sub.user_id, channel, already_decided_text(result.request))


def _escalated_to(request: Request) -> str:
    """Who the request was last escalated to, as mentions ("" if it never was)."""
    state = request.timers
    if state is None or not state.escalated or state.handed_back or not state.escalated_to:
        return ""
    return ", ".join(f"<!subteam^{a}>" if a.startswith("S") else f"<@{a}>" for a in state.escalated_to[:10])


def _approvers_text(request: Request) -> str:
    names = [f"<!subteam^{a}>" if a.startswith("S") else f"<@{a}>" for a in request.approvers[:10]]
    return "Approvers: " + ", ".join(names) + ("…" if len(request.approvers) > 10 else "")


# Slack's text inputs hold at most 3000 characters; anything longer did not come from Slack's own form.
INPUT_MAX = 3000
REASON_MAX = 2000


def _oversize_inputs(values: dict[str, Any]) -> dict[str, str]:
    errors = {}
    for block_id, actions in values.items():
        for action in (actions or {}).values() if isinstance(actions, dict) else ():
            value = action.get("value") if isinstance(action, dict) else None
            limit = REASON_MAX if block_id == "reason" else INPUT_MAX
            if isinstance(value, str) and len(value) > limit:
                errors[str(block_id)] = f"must be at most {limit} characters (this is {len(value)})"
    return errors


def _plain(text: str) -> str:
    """Modal error strings are plain text: drop Slack's <...|fallback> markup to its fallback."""
    text = re.sub(r"<!date\^[^|>]*\|([^>]*)>", r"\1", text)
    text = re.sub(r"<@([A-Z0-9]+)>", r"@\1", text)
    text = re.sub(r"<!subteam\^([A-Z0-9]+)>", r"@\1", text)
    return text[:2000]
