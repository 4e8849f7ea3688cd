"""App Home: "Waiting for you", "Escalated to you", "Decided by you recently"; and `/signoff pending`.

`home_view` and `pending_message` are pure functions of the person's `Inbox` (storage reads it by
user through the `request_people` index). Each section shows at most SECTION_MAX items (the
oldest first; the newest first for decisions) and says how many more there are. Approve and
Reject buttons on Home use the card's action ids: a click from Home arrives with a `view`
container and no channel, and Interactions answers it by DM.

`HomePublisher` is the outbox handler that (re)publishes one person's Home. It renders from the
database at delivery time and, after publishing, re-reads: if the inbox changed while it was
publishing (a racing publish may have shown older data last), it publishes again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from bot.approvals import delivery_results
from bot.approvals.homes import HomeOpens
from bot.approvals.reads import Reads
from bot.process.clock import Clock
from bot.domain.durations import format_duration
from bot.domain.model import Kind, Request
from bot.domain.outcomes import NOT_REPORTED, any_failed
from bot.domain.wire import outcome_status
from bot.outbox import effects
from bot.outbox.effects import Handler
from bot.outbox.dispatcher import Dead, Done, Result
from bot.slack.blocks import APPROVE, APPROVE_CONFIRM, OUTCOME_LABEL, REJECT, RISK_EMOJI
from bot.slack.text import slack_date
from bot.slack.delivery import SlackCall
from bot.slack.previews import clip, escape_mrkdwn, more, one_line, plain
from bot.domain.inbox import Inbox, InboxEntry

SECTION_MAX = 20
VIEW_MAX_BLOCKS = 100
MESSAGE_MAX_BLOCKS = 50
DECIDED_WINDOW = timedelta(days=7)
SUMMARY_MAX = 120
_REPUBLISH_MAX = 3


# --------------------------------------------------------------------------- pure builders


def _link(req: Request, links: dict[str, str], *, limit: int = SUMMARY_MAX) -> str:
    summary = escape_mrkdwn(clip(one_line(req.summary), limit)).replace("|", "¦") or escape_mrkdwn(req.action.name)
    link = links.get(req.id) or req.card_permalink
    return f"<{link}|{summary}>" if link else summary


def _meta(req: Request, now: datetime) -> str:
    waiting = format_duration(max(now - req.created_at, timedelta(0)))
    parts = [f"{RISK_EMOJI[req.risk]} {req.risk.value} risk", f"waiting {waiting}"]
    if req.requested_by:
        parts.append(f"from {escape_mrkdwn(clip(one_line(req.requested_by), 60))}")
    if not (req.card_permalink or req.card_ts):
        parts.append("card not posted yet")
    return " · ".join(parts)


def _item_blocks(entry: InboxEntry, now: datetime, links: dict[str, str]) -> list[dict[str, Any]]:
    req = entry.request
    section = {"type": "section", "text": {"type": "mrkdwn", "text": f"*{_link(req, links)}*\n{_meta(req, now)}"}}
    if not entry.can_decide or req.kind is not Kind.APPROVAL:
        return [section]  # a question is answered in its thread, from the link
    buttons = [
        {"type": "button", "action_id": APPROVE_CONFIRM if req.confirm else APPROVE, "text": plain("Approve"),
         "value": req.id, "style": "primary"},
        {"type": "button", "action_id": REJECT, "text": plain("Reject"), "value": req.id, "style": "danger"},
    ]
    return [section, {"type": "actions", "block_id": f"home:{req.id}", "elements": buttons}]


def _decided_block(req: Request, links: dict[str, str]) -> dict[str, Any]:
    assert req.decision is not None
    emoji, label = OUTCOME_LABEL[req.decision.outcome]
    if any_failed(req.extra):  # approved, then it (or an item of its batch) failed when it ran
        emoji, label = "⚠️", "Failed when run"
    when = slack_date(req.decision.decided_at, "{date_short_pretty} at {time}")
    ran = outcome_status(req)
    if ran == NOT_REPORTED and req.kind is Kind.APPROVAL:  # issue 37: nobody said what ran (yet)
        label += ", no outcome reported"
    elif ran in ("ran", "skipped"):
        label += ", ran" if ran == "ran" else ", not run"
    return _note(f"{emoji} {label} · {_link(req, links)} · {when}")


def _note(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def home_view(inbox: Inbox, *, now: datetime, links: dict[str, str] | None = None,
              tail: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The Home tab: three sections, each bounded, within Slack's 100 blocks; `tail` (grants and
    delegation, issue 12) goes last and its room is kept free."""
    links = links or {}
    tail = tail or []
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": plain("Signoff")},
        _note("Approval requests that wait on you. This page updates itself."),
    ]
    sections: list[tuple[str, list[Any], int, str, Callable[[Any], list[dict[str, Any]]]]] = [
        ("Waiting for you", list(inbox.waiting), inbox.waiting_total, "Nothing is waiting for you. 🎉",
         lambda e: _item_blocks(e, now, links)),
        ("Escalated to you", list(inbox.escalated), inbox.escalated_total, "Nothing was escalated to you.",
         lambda e: _item_blocks(e, now, links)),
        ("Decided by you recently", list(inbox.decided), inbox.decided_total, "You decided nothing in the last 7 days.",
         lambda r: [_decided_block(r, links)]),
    ]
    for index, (title, items, total, empty, render) in enumerate(sections):
        later = 3 * (len(sections) - index - 1) + len(tail)  # each later section: header, divider, note
        blocks += [{"type": "divider"}, {"type": "header", "text": plain(f"{title} ({total})")}]
        shown = 0
        for item in items[:SECTION_MAX]:
            rendered = render(item)
            if len(blocks) + len(rendered) + 1 + later > VIEW_MAX_BLOCKS:
                break
            blocks += rendered
            shown += 1
        if total == 0:
            blocks.append(_note(empty))
        elif total > shown:
            blocks.append(_note(more(total - shown, "requests")))
    return {"type": "home", "blocks": blocks + tail}


def pending_message(inbox: Inbox, *, now: datetime) -> dict[str, Any]:
    """`/signoff pending`: the same lists, one line per request, as an ephemeral message (<= 50 blocks)."""
    blocks: list[dict[str, Any]] = []
    for title, entries, total in (("Waiting for you", inbox.waiting, inbox.waiting_total),
                                  ("Escalated to you", inbox.escalated, inbox.escalated_total)):
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"*{title}* ({total})"}})
        for entry in entries[:SECTION_MAX]:
            req = entry.request
            where = "" if req.card_permalink else f" · in <#{req.card_channel or req.channel}>"
            text = f"• {_link(req, {}, limit=100)}{where}\n{_meta(req, now)}"
            blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text}})
        if total == 0:
            blocks.append(_note("Nothing here."))
        elif total > min(len(entries), SECTION_MAX):
            blocks.append(_note(more(total - min(len(entries), SECTION_MAX), "requests")))
    blocks.append(_note("Approve or reject from each card, or from the Home tab of the Signoff app."))
    waiting = inbox.waiting_total + inbox.escalated_total
    text = f"{waiting} request{'s' if waiting != 1 else ''} wait on you." if waiting else "Nothing waits on you."
    return {"text": text, "blocks": blocks[:MESSAGE_MAX_BLOCKS], "response_type": "ephemeral"}


def _fingerprint(inbox: Inbox) -> tuple[Any, ...]:
    def ids(entries: Any) -> tuple[Any, ...]:
        return tuple((e.request.id, e.request.version, e.can_decide) for e in entries)

    return (ids(inbox.waiting), inbox.waiting_total, ids(inbox.escalated), inbox.escalated_total,
            tuple((r.id, r.version) for r in inbox.decided), inbox.decided_total)


# --------------------------------------------------------------------------- I/O


class Home:
    """Reads a person's inbox; opens Home; answers `/signoff pending`."""

    def __init__(self, reads: Reads, opens: HomeOpens, clock: Clock,
                 viewed: Callable[[list[str]], Awaitable[None]] | None = None) -> None:
        self.reads = reads
        self.opens = opens
        self.clock = clock
        self.viewed = viewed  # a person saw these requests listed (their first view: bot/approvals/stats.py)

    async def inbox(self, user_id: str) -> Inbox:
        now = self.clock.now()
        return await self.reads.inbox(user_id, limit=SECTION_MAX, decided_since=now - DECIDED_WINDOW)

    async def opened(self, user_id: str) -> None:
        """`app_home_opened`: remember the user (their Home is kept up to date) and publish it."""
        if self.viewed is not None:  # what their Home lists for them to decide is now seen
            await self.viewed(_decidable(await self.inbox(user_id)))
        await self.opens.opened(user_id, self.clock.now())

    async def pending(self, user_id: str) -> dict[str, Any]:
        inbox = await self.inbox(user_id)
        if self.viewed is not None:
            await self.viewed(_decidable(inbox))
        return pending_message(inbox, now=self.clock.now())


def _decidable(inbox: Inbox) -> list[str]:
    """The listed requests the person may decide and nobody had opened yet."""
    return [e.request.id for e in (*inbox.waiting, *inbox.escalated) if e.can_decide and e.request.first_viewed_at is None]


class HomePublisher:
    """Outbox handler for `slack.publish_home`: views.publish of one person's Home."""

    def __init__(self, home: Home, call: SlackCall, clock: Clock) -> None:
        self.home = home
        self.call = call
        self.clock = clock
        self.tail: Callable[[str], Awaitable[list[dict[str, Any]]]] | None = None  # set by bot.process.app.build

    def handlers(self) -> dict[str, Handler]:
        return {effects.PUBLISH_HOME: self}

    async def __call__(self, item: Any) -> Result:
        user = str(item.payload["user"])
        links: dict[str, str] = {}
        inbox = await self.home.inbox(user)
        tail = await self.tail(user) if self.tail is not None else None
        for _ in range(_REPUBLISH_MAX):
            links.update(await self._links(inbox, links, item.attempts))
            view = home_view(inbox, now=self.clock.now(), links=links, tail=tail)
            _, failure = await self.call("views.publish", item.attempts, user_id=user, view=view)
            if failure is not None:
                return failure
            again = await self.home.inbox(user)
            if _fingerprint(again) == _fingerprint(inbox):
                break
            inbox = again  # it changed while we published: show the newer one last
        return Done(apply=delivery_results.permalinks(links))

    async def _links(self, inbox: Inbox, known: dict[str, str], attempt: int) -> dict[str, str]:
        """Permalinks of shown cards we do not have yet (stored afterwards: asked once per card)."""
        found: dict[str, str] = {}
        shown = [e.request for e in (*inbox.waiting, *inbox.escalated)] + list(inbox.decided)
        for req in shown:
            if req.card_permalink or req.id in known or not req.has_card:
                continue
            data, failure = await self.call("chat.getPermalink", attempt, channel=req.card_channel,
                                            message_ts=req.card_ts)
            if failure is not None:
                if isinstance(failure, Dead):
                    continue  # that card is gone: show it without a link
                break  # rate limited or down: publish what we have, links come next time
            assert data is not None
            found[req.id] = str(data["permalink"])
        return found
