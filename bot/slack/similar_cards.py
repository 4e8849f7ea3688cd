"""The similar-requests card: "12 similar refund requests from 3 agents" with Review each / Approve all /
Reject all. Pure Block Kit; agent text (tool names, summaries, parameter values) only in plain_text.

Each button carries the ids of the requests the card names (at most bot.domain.similar.MAX_GROUP, within
Slack's 2000-character value), so a click acts on exactly what the card showed.
"""

from __future__ import annotations

from typing import Any

from bot.domain.model import Request
from bot.domain.similar import Group
from bot.slack.previews import clip, one_line, plain

REVIEW = "signoff_similar_review"
APPROVE_ALL = "signoff_similar_approve"
REJECT_ALL = "signoff_similar_reject"
BLOCK = "similar"
LISTED = 10


def similar_message(group: Group, requests: list[Request]) -> dict[str, Any]:
    value = ",".join(group.ids)
    title = group.title()
    lines = [f"• {clip(one_line(r.summary or r.action.name), 120)}" for r in requests[:LISTED]]
    if group.total > LISTED:
        lines.append(f"… and {group.total - LISTED} more")
    count = len(group.ids)
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": plain(f"🧺 {title}, waiting in this channel. They differ only in: "
                                          f"{group.where() or 'nothing'}.", limit=3000)},
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
                 "text": plain(clip(f"Approve {count} {group.tool} requests, each on its own?", 290))}},
            {"type": "button", "action_id": REJECT_ALL, "text": plain(f"Reject all {count}"), "value": value,
             "style": "danger", "confirm": {
                 "title": plain("Reject them all?"), "confirm": plain("Reject all"), "deny": plain("Cancel"),
                 "text": plain(clip(f"Reject {count} {group.tool} requests?", 290))}},
        ]},
    ]
    return {"text": clip(f"{title}: review each, approve all or reject all", 3000), "blocks": blocks}
