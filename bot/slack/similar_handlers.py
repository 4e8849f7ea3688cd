"""Review each / Approve all / Reject all on a similar-requests card.

Every request is decided on its own, exactly as a click on its own card would (`decide_checked` with
the card's checks: pending, who may decide, the allowed decisions, separation of duties, quorum as a
vote), so each ends with one outcome however many people click at once, and its card and agent hear
of it as usual. Before anything is written, every still-pending request is checked for this person:
if they may not make that decision on one of them, nothing is decided and they are told which and why.
Only requests of the card's own channel are acted on.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError

from bot.approvals.access import GroupsUnknown
from bot.approvals.checked import decide_checked
from bot.domain.model import Actor, Outcome, Request, Via
from bot.domain.similar import MAX_GROUP
from bot.slack.interactions import Interactions, already_decided_text
from bot.slack.payloads import REQUEST_ID, BadPayload, user_of
from bot.slack.previews import clip, escape_mrkdwn, one_line
from bot.slack.similar_cards import APPROVE_ALL, REJECT_ALL, REVIEW
from bot.slack.text import groups_unknown_text

log = logging.getLogger(__name__)
LINK_TIMEOUT = 2.0


class SimilarInteractions:
    def __init__(self, interactions: Interactions) -> None:
        self.interactions = interactions
        self.service = interactions.service

    async def _requests(self, value: str, channel: str | None) -> list[Request] | str:
        ids = [i for i in value.split(",") if i]
        if not ids or len(ids) > MAX_GROUP or not all(REQUEST_ID.match(i) for i in ids):
            return "This button does not name Signoff requests. Nothing was changed."
        found = []
        for request_id in dict.fromkeys(ids):
            request = await self.service.reads.request(request_id)
            if request is None:
                continue
            if channel is not None and channel not in (request.channel, request.card_channel):
                return "These requests are not from this channel. Nothing was changed."
            found.append(request)
        return found

    async def review(self, user: str, requests: list[Request]) -> str:
        pending = [r for r in requests if r.is_pending]
        if not pending:
            return "All of them are decided already."
        lines = []
        for request in pending:
            link = await self._link(request)
            summary = escape_mrkdwn(clip(one_line(request.summary or request.action.name), 100)).replace("|", "¦")
            lines.append(f"• <{link}|{summary}>" if link else f"• {summary}")
        return clip(f"{len(pending)} still waiting, each with its own card:\n" + "\n".join(lines), 3000)

    async def _link(self, request: Request) -> str | None:
        if request.card_permalink:
            return request.card_permalink
        if not (request.card_channel and request.card_ts):
            return None
        try:
            found = await asyncio.wait_for(self.interactions.client.chat_getPermalink(
                channel=request.card_channel, message_ts=request.card_ts), LINK_TIMEOUT)
            return str(found["permalink"])
        except (SlackApiError, aiohttp.ClientError, TimeoutError, KeyError) as exc:
            log.info("no permalink for %s: %s", request.id, exc)
            return None

    async def decide_all(self, user: str, name: str | None, requests: list[Request], outcome: Outcome) -> str:
        decision = "approve" if outcome is Outcome.APPROVED else "reject"
        what = "approval" if outcome is Outcome.APPROVED else "rejection"
        done_word = "approved" if outcome is Outcome.APPROVED else "rejected"
        pending = [r for r in requests if r.is_pending]
        if not pending:
            return "All of them are decided already. Nothing was changed."
        try:  # all or nothing: every one is checked before any is decided
            for request in pending:
                refusal = await self.interactions.refusal(request, user, decision=decision, what=what)
                if refusal is not None:
                    return (f"Nothing was {done_word}: you may not {decision} “{escape_mrkdwn(clip(one_line(request.summary), 80))}”"
                            f" ({refusal}). Review each instead.")
        except GroupsUnknown as exc:
            return groups_unknown_text(exc, decision)
        actor = Actor(user, name)
        done = counted = 0
        others: list[str] = []

        async def recheck(state: Request) -> str | None:
            return await self.interactions.refusal(state, user, decision=decision, what=what)

        for request in pending:
            result = await decide_checked(self.service, request, recheck, outcome, via=Via.BUTTON, actor=actor,
                                          comment=f"{done_word.capitalize()} with {len(pending) - 1} similar requests")
            if result.refused is not None:
                others.append(result.refused)
            elif result.counted:
                counted += 1
            elif result.won and not result.duplicate:
                done += 1
            else:
                others.append(already_decided_text(result.request))
        parts = [f"{done_word.capitalize()} {done} of {len(pending)}."]
        if counted:
            parts.append(f"Your approval was counted on {counted} that need more approvals.")
        if others:
            parts.append(f"{len(others)} not by you: {others[0]}")
        return " ".join(parts)

    async def clicked(self, body: dict[str, Any]) -> None:
        try:
            user, name = user_of(body)
        except BadPayload:
            return
        action = (body.get("actions") or [{}])[0]
        channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
        requests = await self._requests(str(action.get("value") or ""), channel)
        if isinstance(requests, str):
            text = requests
        elif action.get("action_id") == REVIEW:
            text = await self.review(user, requests)
        else:
            outcome = Outcome.APPROVED if action.get("action_id") == APPROVE_ALL else Outcome.REJECTED
            text = await self.decide_all(user, name, requests, outcome)
        await self.interactions.tell(user, channel, text)


def register(app: AsyncApp, si: SimilarInteractions) -> None:
    async def on_click(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        await si.clicked(body)

    for action_id in (REVIEW, APPROVE_ALL, REJECT_ALL):
        app.action(action_id)(on_click)
