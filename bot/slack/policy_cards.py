"""What policy adds to Slack: card notes (tier, delegation), the "Approve & remember" button, and the
after-the-fact FYI for calls policy allowed.

The FYI is an outbox item (`policy.fyi`) written in the same unit as the auto-approval; it posts
once: the post carries metadata naming its key, and a retry after an attempt with an unknown
result looks for that message before posting again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.outbox import effects
from bot.approvals.reads import Reads
from bot.process.clock import Clock
from bot.domain.choices import allowed_decisions
from bot.domain.model import AuditEvent, Kind, Request, Risk
from bot.outbox.dispatcher import Dead, Done, Result
from bot.slack.assist import note_blocks
from bot.slack.batch_blocks import batch_page
from bot.slack.blocks import DECIDE_BLOCK, RISK_EMOJI, approval_card
from bot.slack.delivery import SlackCall
from bot.slack.lookup import find_message, is_notice, notice_metadata
from bot.slack.notices import timer_notes
from bot.slack.previews import clip, escape_mrkdwn, one_line
from bot.slack.suggestion_cards import add_suggestion_buttons, suggestion_notes
from bot.slack.text import slack_date
from bot.domain.outbox import OutboxItem

REMEMBER = "signoff_remember"  # "Approve & remember": opens the grant modal


def remember_allowed(req: Request) -> bool:
    """Only under a policy file, never for critical, only for approvals that offer Approve (allowed_decisions),
    never where Approve asks to type a confirmation (the modal would approve without it)."""
    return (req.kind is Kind.APPROVAL and isinstance(req.extra.get("policy"), dict) and req.risk is not Risk.CRITICAL
            and req.confirm is None and "approve" in allowed_decisions(req.kind, req.extra))


def policy_notes(req: Request) -> list[str]:
    notes = []
    policy = req.extra.get("policy")
    if isinstance(policy, dict) and policy.get("rule") and req.is_pending:
        notes.append(f"📋 Asked by policy rule “{escape_mrkdwn(clip(str(policy['rule']), 100))}”")
    for d in req.extra.get("delegations") or []:
        until = d.get("until")
        when = f" until {slack_date(datetime.fromisoformat(until.replace('Z', '+00:00')), '{date_short_pretty}')}" \
            if until else ""
        notes.append(f"🏖️ <@{d['user']}> is away{when}: <@{d['delegate']}> may decide for them")
    return notes


def render_policy_card(req: Request, *, now: datetime) -> dict[str, Any]:
    """The approval card with timer and policy notes, "Approve & remember" where it applies, and
    Claude's permission suggestions (bot/slack/suggestion_cards.py)."""
    notes = [*timer_notes(req), *policy_notes(req)]
    if req.is_batch:  # a batch's first page (issue 12b): several calls, nothing to remember as one
        return batch_page(req, 0, now=now, notes=notes or None)
    if req.is_pending:  # Claude's permission suggestions: shown while someone can still accept one
        notes += suggestion_notes(req)
    card = approval_card(req, now=now, notes=notes or None, aside=note_blocks(req))
    if req.is_pending and remember_allowed(req):
        for block in card["blocks"]:
            if block.get("type") == "actions" and block.get("block_id") == DECIDE_BLOCK:
                button = {"type": "button", "action_id": REMEMBER, "value": req.id,
                          "text": {"type": "plain_text", "text": "Approve & remember"}}
                block["elements"].insert(1, button)
    add_suggestion_buttons(card, req)  # "Approve & always allow ...", right after Approve
    return card


def fyi_text(req: Request) -> str:
    policy = req.extra.get("policy") or {}
    by = f"policy rule “{escape_mrkdwn(clip(str(policy['rule']), 100))}”" if policy.get("rule") else \
        f"the {policy.get('tier', req.risk.value)} tier's default"
    summary = escape_mrkdwn(clip(one_line(req.summary), 300))
    action = escape_mrkdwn(clip(req.action.name, 100)).replace("`", "ˋ")
    return f"{RISK_EMOJI[req.risk]} FYI: `{action}` was allowed without asking, by {by}: {summary}"


class FyiDelivery:
    def __init__(self, reads: Reads, call: SlackCall, clock: Clock) -> None:
        self.reads = reads
        self.call = call
        self.clock = clock

    def handlers(self) -> dict[str, effects.Handler]:
        return {effects.POLICY_FYI: self}

    async def __call__(self, item: OutboxItem) -> Result:
        request = await self.reads.request(item.payload["request_id"])
        if request is None:
            return Dead("request no longer exists")
        if item.uncertain:  # an earlier attempt may have posted: look before posting again
            found = await find_message(self.call, item.attempts, is_notice(item.dedupe_key), channel=request.channel,
                                       thread_ts=request.thread_ts)
            if isinstance(found, str):
                return self._posted(request, found, recovered=True)
            if found is not None:
                return found
        data, failure = await self.call(
            "chat.postMessage", item.attempts, channel=request.channel, thread_ts=request.thread_ts,
            text=fyi_text(request), metadata=notice_metadata(request.id, item.dedupe_key),
            unfurl_links=False, unfurl_media=False,
        )
        if failure is not None:
            return failure
        return self._posted(request, str((data or {}).get("ts")))

    def _posted(self, request: Request, ts: str, *, recovered: bool = False) -> Result:
        data = {"ts": ts, **({"recovered": True} if recovered else {})}
        return Done(audit=(AuditEvent(request.id, "fyi_posted", self.clock.now(), None, data),))
