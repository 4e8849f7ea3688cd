"""Claude's permission suggestions on a card: one "Approve & always allow ..." button per offered
suggestion (one tap, from a phone), and a plain-language line for each suggestion, offered or not.

Pure Block Kit. Suggestions are agent text: they appear in plain_text buttons, or in mrkdwn only
through `escape_mrkdwn` with backquotes neutralised, so a rule cannot ping anyone or fake a link.
"""

from __future__ import annotations

import re
from typing import Any

from bot.domain.model import Request
from bot.domain.suggestions import Suggestion, offers
from bot.slack.blocks import DECIDE_BLOCK
from bot.slack.previews import clip, escape_mrkdwn, one_line

SUGGEST_PREFIX = "signoff_suggest_"  # + the suggestion's index: one action id per button
SUGGEST_ACTION = re.compile(rf"^{SUGGEST_PREFIX}(\d+)$")
BUTTON_TEXT_MAX = 60  # Slack allows 75; kept short so a card's text stays within its budget
NOTE_MAX = 280


def _safe(text: str, limit: int) -> str:
    return escape_mrkdwn(clip(one_line(text), limit)).replace("`", "ˋ")


def button_text(suggestion: Suggestion) -> str:
    return clip(f"Approve & always allow {one_line(suggestion.label)}", BUTTON_TEXT_MAX)


def suggestion_notes(req: Request) -> list[str]:
    """A line per offered suggestion (what accepting it means), and one line for those not offered (why)."""
    found = offers(req)
    notes = [clip(f"💡 Claude suggests: {_safe(s.meaning(), NOTE_MAX)}", NOTE_MAX + 40) for s in found if s.offered]
    skipped = [f"“{_safe(s.label, 100)}” ({_safe(s.why_not or '', 160)})" for s in found if not s.offered]
    if skipped:
        notes.append(clip(f"💭 Claude also suggested, not offered here: {'; '.join(skipped)}", NOTE_MAX + 40))
    return notes


def add_suggestion_buttons(card: dict[str, Any], req: Request) -> None:
    """Put one button per offered suggestion right after Approve on `req`'s pending card."""
    buttons = [{"type": "button", "action_id": f"{SUGGEST_PREFIX}{s.index}", "value": req.id,
                "text": {"type": "plain_text", "text": button_text(s)}} for s in offers(req) if s.offered]
    if not buttons or not req.is_pending:
        return
    for block in card["blocks"]:
        if block.get("type") == "actions" and block.get("block_id") == DECIDE_BLOCK:
            block["elements"][1:1] = buttons
            return


def accepted_text(suggestion: Suggestion, grant_ids: list[str]) -> str:
    """The decision's comment: what was allowed from now on, and under which grants."""
    ids = ", ".join(grant_ids)
    return (f"Approved, and accepted Claude's suggestion: {one_line(suggestion.meaning())} "
            f"(grant {ids}; Claude Code remembers it too).")
