"""The similar-requests card: "12 similar refund requests from 3 agents" with Review each / Approve all /
Reject all, as it is now: the requests still pending, how the others ended, and once none is pending the
final tally and no buttons. Pure Block Kit; agent text (tool names, summaries, parameter values) only in
plain_text.

Each button carries the ids of the requests still pending when it was rendered (at most
bot.domain.similar.MAX_GROUP, within Slack's 2000-character value), so a click acts on exactly what the card
showed, and of those only on what is still pending when it lands.
"""

from __future__ import annotations

from typing import Any

from bot.domain.similar import Digest, where
from bot.slack.previews import clip, one_line, plain

REVIEW = "signoff_similar_review"
APPROVE_ALL = "signoff_similar_approve"
REJECT_ALL = "signoff_similar_reject"
BLOCK = "similar"
LISTED = 10
EVENT_TYPE = "signoff_similar"  # the card's metadata: a post retried after an unknown result looks for it


def similar_message(digest: Digest) -> dict[str, Any]:
    card, pending = digest.card, digest.pending
    title = digest.title()
    tally = digest.tally()
    differ = f"They differ only in: {where(card.shape) or 'nothing'}."
    if not pending:
        head = f"🧺 {title}: all decided{f' ({tally})' if tally else ''}. {differ}"
        return {"text": clip(f"{title}: all decided{f' ({tally})' if tally else ''}", 3000),
                "blocks": [{"type": "section", "text": plain(head, limit=3000)}]}
    waiting = f"{len(pending)} waiting in this channel" + (f"; {tally}" if tally else "")
    lines = [f"• {clip(one_line(r.summary or r.action.name), 120)}" for r in pending[:LISTED]]
    if len(pending) > LISTED:
        lines.append(f"… and {len(pending) - LISTED} more")
    value = ",".join(r.id for r in pending)
    count = len(pending)
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": plain(f"🧺 {title}, {waiting}. {differ}", limit=3000)},
        {"type": "section", "text": plain("\n".join(lines), limit=3000)},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": (
            "Each request is decided on its own, as if clicked on its card: who may approve, separation of "
            "duties and quorum hold for each. If you may not approve one of them, nothing is approved: review "
            "each instead.")}]},
        {"type": "actions", "block_id": BLOCK, "elements": [
            {"type": "button", "action_id": REVIEW, "text": plain("Review each"), "value": value},
            {"type": "button", "action_id": APPROVE_ALL, "text": plain(f"Approve all {count}"), "value": value,
             "style": "primary", "confirm": {
                 "title": plain("Approve them all?"), "confirm": plain("Approve all"), "deny": plain("Cancel"),
                 "text": plain(clip(f"Approve {count} {card.tool} requests, each on its own?", 290))}},
            {"type": "button", "action_id": REJECT_ALL, "text": plain(f"Reject all {count}"), "value": value,
             "style": "danger", "confirm": {
                 "title": plain("Reject them all?"), "confirm": plain("Reject all"), "deny": plain("Cancel"),
                 "text": plain(clip(f"Reject {count} {card.tool} requests?", 290))}},
        ]},
    ]
    return {"text": clip(f"{title}, {waiting}: review each, approve all or reject all", 3000), "blocks": blocks}
