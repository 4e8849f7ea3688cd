"""Time to decide in Slack: `/signoff stats`, App Home's "Last 7 days" section and the weekly digest
(pure renderings of a `Summary`), and the digest's outbox handler."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from bot.domain.audit_chain import Anchor
from bot.domain.stats import Summary, short
from bot.outbox import effects
from bot.outbox.dispatcher import Done, Result
from bot.domain.outbox import OutboxItem
from bot.slack.delivery import SlackCall
from bot.slack.lookup import find_message, is_notice, notice_metadata
from bot.slack.previews import clip, escape_mrkdwn
from bot.slack.text import slack_date

EXPIRED_SHOWN = 5
STATS_HELP = "`/signoff stats`: this channel's last 7 days · `/signoff stats all`: the whole workspace"


def _scope(summary: Summary) -> str:
    return f"<#{summary.channel}>" if summary.channel else "the workspace"


def _tool(name: str) -> str:
    return "`" + escape_mrkdwn(clip(name, 80)).replace("`", "ˋ") + "`"


def figures(summary: Summary) -> str:
    """The figures, as mrkdwn lines."""
    if not summary.requests:
        return "No approval requests."
    lines = [
        f"*{summary.requests}* request{'s' if summary.requests != 1 else ''} · *{summary.decided_by_people}* decided "
        f"by people · {summary.pending} still pending",
        f"Time to decide: median *{short(summary.median_to_decide)}*, p90 *{short(summary.p90_to_decide)}* · "
        f"first opened after {short(summary.median_to_first_view)} (median)",
        f"✅ {summary.approved} approved ({summary.edited} edited) · ❌ {summary.rejected} rejected · "
        f"⌛ {summary.expired} expired · ⬆️ {summary.escalated} escalated",
    ]
    if summary.top_tools:
        lines.append("Most asked: " + ", ".join(f"{_tool(t)} ({n})" for t, n in summary.top_tools))
    if summary.expired_ids and summary.channel is not None:  # ids only in a channel's own figures, not workspace-wide
        shown = ", ".join(f"{_tool(tool)} `{rid}`" for rid, tool in summary.expired_ids[:EXPIRED_SHOWN])
        more = len(summary.expired_ids) - EXPIRED_SHOWN
        lines.append("Expired: " + shown + (f" and {more} more" if more > 0 else ""))
    if summary.truncated:
        lines.append("_Only the first requests of this period were counted (there were too many to read at once)._")
    return "\n".join(lines)


def _period(summary: Summary) -> str:
    until = summary.until - timedelta(seconds=1)
    return f"{slack_date(summary.since, '{date_short}')} – {slack_date(until, '{date_short}')}"


def stats_message(summary: Summary) -> dict[str, Any]:
    """`/signoff stats` (ephemeral)."""
    title = f"📊 Last 7 days in {_scope(summary)} ({_period(summary)})"
    text = f"{title}\n{figures(summary)}"
    return {"response_type": "ephemeral", "text": clip(text, 3000), "blocks": [
        {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, 3000)}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": STATS_HELP}]},
    ]}


def home_section(summary: Summary) -> list[dict[str, Any]]:
    """App Home's "Last 7 days" (the workspace)."""
    return [
        {"type": "divider"},
        {"type": "header", "text": {"type": "plain_text", "text": "Last 7 days"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": clip(figures(summary), 3000)}},
    ]


def anchor_line(anchor: Anchor) -> str:
    """The audit chain's signed head, for a record kept outside the database (docs/audit.md)."""
    return (f"🔗 Audit chain anchored at position {anchor.seq} on {slack_date(anchor.at, '{date_short} {time}')}: "
            f"`{anchor.hash}` (signed by key `{anchor.kid}`; `signoff audit verify --anchor` checks the chain "
            "still passes through it)")


def digest_message(summary: Summary, anchor: Anchor | None = None) -> dict[str, Any]:
    """The weekly digest of one channel, with the audit chain's latest anchor when there is one."""
    title = f"🗓️ Weekly approvals digest for {_scope(summary)} ({_period(summary)})"
    text = clip(f"{title}\n{figures(summary)}", 3000)
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]
    if anchor is not None:
        line = anchor_line(anchor)
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": line}]})
        text = f"{text}\n{line}"
    return {"text": text, "blocks": blocks}


class DigestDelivery:
    """Outbox handler of `slack.digest`: posts the stored message once (a retry after an unknown result
    looks for it first, by the metadata naming its key)."""

    def __init__(self, call: SlackCall) -> None:
        self.call = call

    def handlers(self) -> dict[str, effects.Handler]:
        return {effects.DIGEST: self}

    async def __call__(self, item: OutboxItem) -> Result:
        channel = str(item.payload["channel"])
        message = item.payload["message"]
        if item.uncertain:
            found = await find_message(self.call, item.attempts, is_notice(item.dedupe_key), channel=channel)
            if isinstance(found, str):
                return Done()
            if found is not None:
                return found
        _, failure = await self.call("chat.postMessage", item.attempts, channel=channel, text=message["text"],
                                     blocks=message["blocks"], metadata=notice_metadata("digest", item.dedupe_key),
                                     unfurl_links=False, unfurl_media=False)
        return failure if failure is not None else Done()
