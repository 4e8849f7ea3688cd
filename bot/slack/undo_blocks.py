"""A card whose approval waits in its undo window (bot/domain/undo.py): "Runs in 30 s · Undo", and the
note an Undo leaves. Pure functions of the request, like the rest of the card."""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any

from bot.domain.model import Request
from bot.domain.undo import held, undone
from bot.domain.values import from_iso
from bot.slack.text import slack_date

UNDO = "signoff_undo"
HELD_BLOCK = "held"
_USER = re.compile(r"^[UW][A-Z0-9]{1,30}$")


def _mention(user_id: str) -> str:
    return f"<@{user_id}>" if _USER.match(user_id) else "someone"


def held_blocks(req: Request, now: datetime) -> list[dict[str, Any]]:
    """The approval line and the Undo button of a held approval; [] when nothing is held."""
    approval = held(req)
    if approval is None:
        return []
    seconds = max(0, math.ceil((approval.until - now).total_seconds()))
    line = (f"✅ *Approved* by {_mention(approval.actor.id)} · runs in {seconds} s "
            f"({slack_date(approval.until, '{time_secs}')}) unless undone")
    if approval.changes:
        line += f" · {len(approval.changes)} edited parameter" + ("s" if len(approval.changes) > 1 else "")
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": line}},
        {"type": "actions", "block_id": HELD_BLOCK, "elements": [
            {"type": "button", "action_id": UNDO, "text": {"type": "plain_text", "text": "Undo"}, "value": req.id,
             "style": "danger"}]},
    ]


def undo_notes(req: Request) -> list[str]:
    """The note an Undo leaves on a pending card."""
    note = undone(req)
    if note is None or not req.is_pending or held(req) is not None:
        return []
    at = from_iso(note["at"])
    return [f"↩️ {_mention(str(note.get('by', '')))} undid their approval at {slack_date(at, '{time_secs}')}; "
            "it waits for a decision again."]
