"""Outbox handlers for timer notices: reminders and escalations in the card's thread, and DMs.

Each handler performs at most one Slack effect that is not safe to repeat (a post), and performs
it last: reads (permalink, user-group members) come first, so a failure before the post retries
cleanly. A post carries metadata naming its outbox key; a retry after an attempt that ended
without a known result looks for that metadata (conversations.replies in the thread,
conversations.history in the DM) before posting again, so a crash never duplicates a notice.

A notice for a request that was decided meanwhile is dropped: pending reminders stop.
Text is rendered at delivery time from the request's current state and the item's payload.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from bot.process.clock import Clock
from bot.domain.durations import format_duration
from bot.domain.model import AuditEvent, Request
from bot.domain.timing import OUTCOME_WORDS, TimerState
from bot.outbox import effects
from bot.approvals.access import Directory
from bot.approvals import delivery_results
from bot.approvals.homes import user_ids
from bot.outbox.effects import Handler
from bot.outbox.dispatcher import Dead, Done, Result, after_post
from bot.approvals.service import Service
from bot.slack.batch_blocks import batch_page
from bot.slack.blocks import approval_card
from bot.slack.delivery import SlackCall
from bot.slack.lookup import find_message, is_notice, notice_metadata
from bot.slack.text import clip, escape_mrkdwn, mention, one_line, slack_date
from bot.domain.outbox import OutboxItem

log = logging.getLogger(__name__)

SUMMARY_MAX = 150
NOTE_MAX = 1000
MAX_DMS = 50  # per escalation: a huge user group is mentioned in the thread, not DMed one by one
_TIMEOUT_PHRASE = {"expire": "it expires", "reject": "it is rejected", "approve": "it is approved"}


# --------------------------------------------------------------------------- the card's timer notes


def timer_notes(req: Request) -> list[str]:
    """Signoff's own lines for the card's context: escalation, hand-back, note, timeout."""
    state, timing = req.timers, req.timing
    notes: list[str] = []
    if state is not None and state.escalated_to:
        notes.append(_moved_line(req, state))
        if state.note and state.note.strip():
            who = f"<@{state.escalated_by}>" if state.escalated_by else "Signoff"
            notes.append(f"📝 {who}: “{escape_mrkdwn(clip(one_line(state.note), 300))}”")
    if req.is_pending and state is not None and state.expires_at is not None and timing is not None:
        phrase = _TIMEOUT_PHRASE[OUTCOME_WORDS[timing.timeout_outcome]]
        notes.append(f"⏳ No decision by {slack_date(state.expires_at, '{date_short_pretty} at {time}')}: {phrase}")
    return notes


def _moved_line(req: Request, state: TimerState) -> str:
    targets = ", ".join(mention(t) for t in state.escalated_to[:10])
    if state.handed_back:
        return f"↩️ Handed back to {targets} by <@{state.escalated_by}>"
    line = f"⬆️ Escalated to {targets}"
    levels = req.timing.levels if req.timing is not None else ()
    if 0 < state.level <= len(levels) and levels[state.level - 1].notify == state.escalated_to:  # not a person's
        line += f" (level {state.level} of {len(levels)}{_round(state.loop)})"
    if state.escalated_by:
        line += f" by <@{state.escalated_by}>"
    return line


def _round(loop: int) -> str:
    return f", round {loop + 1}" if loop else ""


def render_card(req: Request, *, now: datetime) -> dict[str, Any]:
    """The approval card with its timer notes (what CardDelivery renders); a batch's first page."""
    if req.is_batch:
        return batch_page(req, 0, now=now, notes=timer_notes(req) or None)
    return approval_card(req, now=now, notes=timer_notes(req) or None)


# --------------------------------------------------------------------------- texts


def _summary(req: Request) -> str:
    return escape_mrkdwn(clip(one_line(req.summary), SUMMARY_MAX)) or escape_mrkdwn(req.action.name)


def _note(note: str | None) -> str:
    if not note or not note.strip():
        return ""
    quoted = "\n".join(f">{line}" for line in escape_mrkdwn(clip(note.strip(), NOTE_MAX)).splitlines())
    return f"\n{quoted}"


def reminder_text(req: Request, number: int, of: int, now: datetime) -> str:
    who = " ".join(mention(a) for a in req.approvers[:20])
    waiting = format_duration(now - req.created_at)
    lead = f"⏰ Reminder {number} of {of}: " + (f"{who}, this" if who else "this")
    return f"{lead} request has been waiting {waiting} for a decision."


def thread_escalation_text(req: Request, payload: dict[str, Any], now: datetime) -> str:
    targets = ", ".join(mention(t) for t in payload["to"][:20])
    by = payload.get("by")
    if payload.get("kind") == "handback":
        return f"↩️ <@{by}> handed this back to {targets}.{_note(payload.get('note'))}"
    level = _level_text(payload)
    if by:
        return f"⬆️ <@{by}> escalated this to {targets}{level}.{_note(payload.get('note'))}"
    waiting = format_duration(now - req.created_at)
    return f"⬆️ Escalated to {targets}{level}: no decision after {waiting}."


def _level_text(payload: dict[str, Any]) -> str:
    if not payload.get("level"):
        return ""
    return f" (level {payload['level']} of {payload['of']}{_round(int(payload.get('loop') or 0))})"


def dm_text(req: Request, payload: dict[str, Any], permalink: str | None, now: datetime) -> str:
    by = payload.get("by")
    waiting = format_duration(now - req.created_at)
    link = f"\n<{permalink}|Open the request>" if permalink else f"\nIt is in <#{req.card_channel or req.channel}>."
    if payload.get("kind") == "handback":
        head = f"↩️ <@{by}> handed an approval request back to you"
    else:
        head = "⬆️ An approval request was escalated to you" + _level_text(payload) + (f" by <@{by}>" if by else "")
    return f"{head}: *{_summary(req)}* (waiting {waiting}).{_note(payload.get('note'))}{link}"


# --------------------------------------------------------------------------- outbox handlers


class NoticeDelivery:
    def __init__(self, service: Service, call: SlackCall, clock: Clock, directory: Directory | None) -> None:
        self.service = service
        self.reads = service.reads
        self.call = call
        self.clock = clock
        self.directory = directory

    async def _card(self, item: OutboxItem) -> Request | Result:
        """The pending request whose card is posted, or the Result that ends/delays this item."""
        request = await self.reads.request(item.payload["request_id"])
        if request is None:
            return Dead("request no longer exists")
        if not request.is_pending:
            return Done()  # decided meanwhile: a reminder or escalation notice is moot
        if not request.has_card:
            return await after_post(self.reads, request.id, effects.POST_CARD, "card")  # no card: there is no thread
        return request

    async def _post_in_thread(self, item: OutboxItem, request: Request, text: str) -> Result | None:
        assert request.card_channel and request.card_ts
        if item.uncertain:
            found = await find_message(self.call, item.attempts, is_notice(item.dedupe_key),
                                       channel=request.card_channel, thread_ts=request.card_ts)
            if isinstance(found, str):
                return None  # an interrupted attempt posted it
            if found is not None:
                return found
        _, failure = await self.call(
            "chat.postMessage", item.attempts, channel=request.card_channel, thread_ts=request.card_ts, text=text,
            metadata=notice_metadata(request.id, item.dedupe_key), unfurl_links=False, unfurl_media=False,
        )
        return failure

    def handlers(self) -> dict[str, Handler]:
        return {effects.REMIND: self.remind, effects.ESCALATE: self.escalate, effects.HANDBACK: self.escalate,
                effects.DM: self.dm}

    async def remind(self, item: OutboxItem) -> Result:
        found = await self._card(item)
        if not isinstance(found, Request):
            return found
        text = reminder_text(found, int(item.payload["number"]), int(item.payload["of"]), self.clock.now())
        failure = await self._post_in_thread(item, found, text)
        return failure or Done()

    async def escalate(self, item: OutboxItem) -> Result:
        """Thread post, then one DM item per target (user groups expanded), added to their App Home."""
        found = await self._card(item)
        if not isinstance(found, Request):
            return found
        request = found
        payload = {**item.payload, "kind": "handback" if item.kind == effects.HANDBACK else "escalate"}
        permalink = request.card_permalink
        if permalink is None:
            data, failure = await self.call("chat.getPermalink", item.attempts, channel=request.card_channel,
                                            message_ts=request.card_ts)
            if failure is not None and not isinstance(failure, Dead):
                return failure
            permalink = str(data["permalink"]) if data else None
        people = await self._people(payload["to"], exclude=payload.get("by"))
        failure = await self._post_in_thread(item, request, thread_escalation_text(request, payload, self.clock.now()))
        if failure is not None:
            return failure
        return Done(apply=delivery_results.escalated(request, item, payload, people, permalink, self.clock))

    async def _people(self, targets: list[str], *, exclude: str | None) -> list[str]:
        people: list[str] = []
        for target in targets:
            if target.startswith("S") and self.directory is not None:
                try:
                    people.extend(sorted(await self.directory.group_members(target)))
                except LookupError:
                    log.warning("escalation target %s is not a user group Slack knows", target)
            else:
                people.append(target)
        return [p for p in user_ids(people) if p != exclude][:MAX_DMS]

    async def dm(self, item: OutboxItem) -> Result:
        request = await self.reads.request(item.payload["request_id"])
        if request is None:
            return Dead("request no longer exists")
        if not request.is_pending:
            return Done()
        user = str(item.payload["user"])
        if item.uncertain:  # an earlier attempt may have posted: look in the DM before posting again
            data, failure = await self.call("conversations.open", item.attempts, users=user)
            if failure is not None and not isinstance(failure, Dead):
                return failure
            if data is not None:  # (refused for good: a possible duplicate beats a missed escalation)
                found = await find_message(self.call, item.attempts, is_notice(item.dedupe_key),
                                           channel=str(data["channel"]["id"]))
                if isinstance(found, str):
                    return self._notified(request, user, item, recovered=True)  # an interrupted attempt sent it
                if found is not None:
                    return found
        text = dm_text(request, item.payload["notice"], item.payload.get("permalink"), self.clock.now())
        _, failure = await self.call(
            "chat.postMessage", item.attempts, channel=user, text=text,
            metadata=notice_metadata(request.id, item.dedupe_key), unfurl_links=False, unfurl_media=False,
        )
        if failure is not None:
            return failure
        return self._notified(request, user, item)

    def _notified(self, request: Request, user: str, item: OutboxItem, *, recovered: bool = False) -> Result:
        data = {"user": user, "by": "dm", "key": item.dedupe_key, **({"recovered": True} if recovered else {})}
        return Done(audit=(AuditEvent(request.id, "notified", self.clock.now(), None, data),))
