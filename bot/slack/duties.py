"""Slack side of quorum, separation of duties and typed confirmation: the confirmation modal,
checking what was typed, and the lines the card shows about them.

Pure builders and checks; `interactions.py` calls them. Whatever the agent chose as the
confirmation string is shown as plain text and compared exactly (surrounding spaces aside).
"""

from __future__ import annotations

import json
from typing import Any

from bot.domain.model import Request, Risk
from bot.domain.values import APPROVER_ID
from bot.domain.votes import Vote
from bot.slack.previews import clip, plain

CONFIRM_VIEW = "signoff_confirm"
CONFIRM_BLOCK = "confirm"
CONFIRM_ACTION = "typed"
CONFIRM_SHOWN_MAX = 200
MENTIONS_SHOWN = 10
RISKS = tuple(r.value for r in Risk)


def mention(user_id: str) -> str:
    return f"<!subteam^{user_id}>" if user_id.startswith("S") else f"<@{user_id}>"


def confirm_block(req: Request) -> dict[str, Any]:
    """The input where the approver types the confirmation string (also part of the edit modal)."""
    assert req.confirm is not None
    return {
        "type": "input",
        "block_id": CONFIRM_BLOCK,
        "label": plain(f"Type {clip(req.confirm, CONFIRM_SHOWN_MAX)} to approve", limit=2000),
        "element": {"type": "plain_text_input", "action_id": CONFIRM_ACTION,
                    "max_length": min(3000, max(1, len(req.confirm) + 50))},
        "hint": plain("This action needs typed confirmation: a click alone does not approve it.", limit=2000),
    }


def confirm_modal(req: Request) -> dict[str, Any]:
    """The modal Approve opens on a request with `confirm`."""
    blocks = [
        {"type": "section", "text": plain(req.summary, limit=500)},
        {"type": "context", "elements": [plain(f"{req.risk.value} risk · {req.action.name}", limit=2000)]},
        confirm_block(req),
    ]
    return {
        "type": "modal",
        "callback_id": CONFIRM_VIEW,
        "title": {"type": "plain_text", "text": "Confirm approval"},
        "submit": {"type": "plain_text", "text": "Approve"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "private_metadata": json.dumps({"request_id": req.id, "version": req.version}),
        "blocks": blocks,
    }


def confirm_errors(req: Request, values: dict[str, Any]) -> dict[str, str]:
    """Inline errors (keyed by block id) unless the typed text is the request's confirmation string."""
    if req.confirm is None:
        return {}
    typed = ((values.get(CONFIRM_BLOCK) or {}).get(CONFIRM_ACTION) or {}).get("value")
    if isinstance(typed, str) and typed.strip() == req.confirm:
        return {}
    return {CONFIRM_BLOCK: clip(f"That does not match. Type exactly: {req.confirm}", 2000)}


def progress_text(votes: tuple[Vote, ...], quorum: int) -> str:
    """"1 of 2: @ana" (mrkdwn; voter ids come from Slack's own payloads)."""
    who = ", ".join(mention(v.voter.id) for v in votes[:MENTIONS_SHOWN])
    more = f" and {len(votes) - MENTIONS_SHOWN} more" if len(votes) > MENTIONS_SHOWN else ""
    return f"{len(votes)} of {quorum}" + (f": {who}{more}" if votes else "")


def duty_notes(req: Request) -> list[str]:
    """The card's lines about quorum, the requester and typed confirmation (Signoff's own text)."""
    notes: list[str] = []
    if req.quorum > 1:
        line = f"👥 Needs {req.quorum} approvals · {progress_text(req.votes, req.quorum)}"
        if not req.is_pending:
            line = f"👥 {progress_text(req.votes, req.quorum)} approvals"
        notes.append(line)
    if req.requester_user:
        rule = "" if req.requester_may_approve else " (may not approve it)"
        notes.append(f"🙋 Requested by {mention(req.requester_user)}{rule}")
    if req.confirm is not None and req.is_pending:
        notes.append("⌨️ Approving asks you to type a confirmation")
    asked = asked_note(req.extra.get("asked"))
    if asked:
        notes.append(asked)
    return notes


def asked_note(asked: Any) -> str | None:
    """The line saying the agent asked for a higher bar than policy's (`extra["asked"]`, written by
    bot.approvals.gate.apply_evaluation from checked values; re-checked here, since it is read back from storage)."""
    if not isinstance(asked, dict):
        return None
    parts: list[str] = []
    risk = asked.get("risk")
    if isinstance(risk, dict) and str(risk.get("asked")) in RISKS and str(risk.get("policy")) in RISKS:
        parts.append(f"risk {risk['asked']} (policy: {risk['policy']})")
    if isinstance(asked.get("quorum"), int) and not isinstance(asked.get("quorum"), bool):
        parts.append(f"quorum {asked['quorum']}")
    if isinstance(asked.get("timeout"), str):
        parts.append(f"a timeout of {plain(asked['timeout'][:20])}")
    named = [a for a in asked.get("approvers") or [] if isinstance(a, str) and APPROVER_ID.match(a)]
    line = f"🔎 The agent asked for more scrutiny: {', '.join(parts)}" if parts else None
    if named:
        # Written as plain ids, not mentions: people the agent named are not pinged, nor approvers.
        who = ", ".join(named[:MENTIONS_SHOWN]) + (" …" if len(named) > MENTIONS_SHOWN else "")
        extra = f"it also named {who}, who decide only if policy lists them"
        line = f"{line}; {extra}" if line else f"🔎 The agent {extra}"
    return line


def duplicate_text(req: Request) -> str:
    return (f"You already approved this request; one person counts once. It needs {req.quorum} different "
            f"approvers: {progress_text(req.votes, req.quorum)}. Nothing was changed.")


def counted_text(req: Request) -> str:
    left = req.quorum - len(req.votes)
    return (f"Your approval counts: {progress_text(req.votes, req.quorum)}. "
            f"Waiting for {left} more {'approver' if left == 1 else 'approvers'}.")
