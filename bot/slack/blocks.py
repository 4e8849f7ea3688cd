"""Block Kit builders: pure functions from domain values to the dicts Slack receives.

The approval card is built in parts with explicit text budgets, so whatever an agent sends
(a 10,000-line diff, 100 parameters) the message stays inside Slack's limits: at most 50
blocks, 3000 characters per section, and TOTAL_TEXT_BUDGET characters of text in all.
That cumulative limit is undocumented: bolt-js #2509 saw `msg_blocks_too_long` at ~13.2k
characters of markdown blocks, and #2867 at 11,341 summed `text` characters of rich_text +
section + header blocks, so we stay at 10,000. The preview gets whatever the other parts
leave, up to PREVIEW_MAX.

Modals live in `bot.slack.modals` and previews in `bot.slack.previews`; both are re-exported.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from bot.domain.choices import allowed_decisions
from bot.domain.model import Actor, Decision, Outcome, Request, Risk, Status, Via
from bot.domain.outcomes import RanStatus, RunOutcome, any_failed, outcome_of
from bot.slack.duties import duty_notes, progress_text
from bot.slack.receipts import ran_blocks
from bot.slack.undo_blocks import UNDO as UNDO, held_blocks, undo_notes
from bot.slack.modals import (
    EDIT_VIEW,
    REJECT_VIEW,
    RESPOND_VIEW,
    edit_modal,
    parse_edit_submission,
    parse_reject_submission,
    parse_respond_submission,
    reject_modal,
    respond_modal,
)
from bot.slack.text import slack_date, visible
from bot.slack.previews import (
    clip,
    cut,
    escape_mrkdwn,
    more,
    neutralise,
    note,
    one_line,
    plain,
    render_preview,
    rich_text,
    rt_bullets,
    rt_quote,
    rt_section,
    rt_text,
    show_value,
    text_length,
)

__all__ = [
    "APPROVE", "APPROVE_CONFIRM", "EDIT", "REJECT", "RESPOND", "EDIT_VIEW", "REJECT_VIEW", "RESPOND_VIEW", "DECIDE_BLOCK",
    "approval_card", "edit_modal", "reject_modal", "respond_modal", "parse_edit_submission",
    "parse_reject_submission", "parse_respond_submission", "escape_mrkdwn", "text_length",
]  # fmt: skip

APPROVE = "signoff_approve"
# Approve on a request that asks to type a confirmation: it opens a modal, so its listener runs at
# once (the trigger_id lives 3 s), not behind the click backlog and the decision slot.
APPROVE_CONFIRM = "signoff_approve_confirm"
EDIT = "signoff_edit"
REJECT = "signoff_reject"
RESPOND = "signoff_respond"
SNOOZE = "signoff_snooze"
ESCALATE = "signoff_escalate"
DECIDE_BLOCK = "decide"

# Slack's limits (SLACK_FACTS.md section 2) and our budgets within them.
MAX_BLOCKS = 50
HEADER_MAX = 150
SECTION_TEXT_MAX = 3000
BUTTON_VALUE_MAX = 2000
TOTAL_TEXT_BUDGET = 10_000  # all `text` in the blocks; see the module docstring
SAFETY_MARGIN = 300  # room for our own labels that budgets below do not count
FALLBACK_SUMMARY_MAX = 300
SUMMARY_BUDGET = 1000  # the full summary, when the header had to cut it
NOTES_BUDGET = 600
PARAMS_BUDGET = 2000
PARAMS_SHOWN_MAX = 25
PARAM_VALUE_MAX = 300
REASONING_BUDGET = 1200
CHANGES_SHOWN_MAX = 10
CHANGE_VALUE_MAX = 150
CHANGES_BUDGET = 1200
COMMENT_BUDGET = 1000
RAN_ERROR_BUDGET = 1000
PREVIEW_MAX = 6000

RISK_EMOJI = {Risk.LOW: "🟢", Risk.MEDIUM: "🟡", Risk.HIGH: "🟠", Risk.CRITICAL: "🔴"}
OUTCOME_LABEL = {
    Outcome.APPROVED: ("✅", "Approved"),
    Outcome.REJECTED: ("❌", "Rejected"),
    Outcome.EXPIRED: ("⌛", "Expired"),
    Outcome.CANCELLED: ("🚫", "Cancelled"),
    Outcome.ANSWERED: ("💬", "Answered"),
}
_STATUS_OUTCOME = {Status(o.value): o for o in Outcome}
_SLACK_USER_ID = re.compile(r"^[UW][A-Z0-9]+$")


def approval_card(req: Request, *, now: datetime, notes: list[str] | None = None,
                  aside: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The message for `req`: {"text": fallback, "blocks": [...]}, pending or decided.

    `notes` are Signoff's own lines (mrkdwn, e.g. escalation notices), never agent text; `aside` are
    blocks shown under them and counted in the text budget (the AI note, bot/slack/assist.py).
    """
    outcome = _outcome(req)
    top = [_header(req), *_long_summary(req), _context_line(req, now)]
    notes = [*(notes or []), *duty_notes(req), *undo_notes(req)]
    if notes:
        top.append(_notes(notes))
    top += aside or []
    bottom = [*_params(req), *_reasoning(req)]
    bottom += _decided(req, outcome) if outcome else held_blocks(req, now) or [_buttons(req)]
    preview: list[dict[str, Any]] = []
    if req.preview is not None:
        room = TOTAL_TEXT_BUDGET - SAFETY_MARGIN - text_length(top) - text_length(bottom)
        preview = render_preview(req.preview, min(PREVIEW_MAX, room))
    blocks = [*top, *preview, *bottom][:MAX_BLOCKS]
    return {"text": _fallback(req, outcome), "blocks": blocks}


def _outcome(req: Request) -> Outcome | None:
    if req.decision is not None:
        return req.decision.outcome
    return None if req.is_pending else _STATUS_OUTCOME.get(req.status)


def _fallback(req: Request, outcome: Outcome | None) -> str:
    # The fallback is what notifications show, and Slack parses it as mrkdwn: escape it.
    summary = escape_mrkdwn(clip(one_line(req.summary), FALLBACK_SUMMARY_MAX)) or "an action"
    if outcome is None:
        return f"Approval needed: {summary}"
    if outcome is Outcome.APPROVED and any_failed(req.extra):
        return f"{OUTCOME_LABEL[outcome][1]}, then failed when run: {summary}"
    return f"{OUTCOME_LABEL[outcome][1]}: {summary}"


def _header(req: Request) -> dict[str, Any]:
    text = one_line(neutralise(req.summary)) or f"Approve {req.action.name}?"
    return {"type": "header", "text": plain(text, limit=HEADER_MAX)}


def _long_summary(req: Request) -> list[dict[str, Any]]:
    """The whole summary under the header, when the header could only show its start."""
    if len(one_line(neutralise(req.summary))) <= HEADER_MAX:
        return []
    return [rich_text(rt_section(rt_text(cut(visible(req.summary), SUMMARY_BUDGET))))]


def _context_line(req: Request, now: datetime) -> dict[str, Any]:
    # A request stamped after `now` (clock skew between replicas) would read "in 2 minutes".
    comparable = (req.created_at.tzinfo is None) == (now.tzinfo is None)
    asked_at = min(req.created_at, now) if comparable else req.created_at
    action = escape_mrkdwn(clip(req.action.name, 200)).replace("`", "ˋ")
    elements = [
        plain(f"🤖 {req.requested_by or 'an agent'}", limit=200),
        {"type": "mrkdwn", "text": f"{RISK_EMOJI[req.risk]} *{req.risk.value}* risk"},
        {"type": "mrkdwn", "text": f"requested {slack_date(asked_at, '{ago}')}"},
        {"type": "mrkdwn", "text": f"`{action}`", "verbatim": True},
    ]
    return {"type": "context", "elements": elements}


def _notes(notes: list[str]) -> dict[str, Any]:
    per_note = NOTES_BUDGET // min(len(notes), 10)
    shown = [{"type": "mrkdwn", "text": clip(n, per_note) or " "} for n in notes[:10]]
    return {"type": "context", "elements": shown}


def _params(req: Request) -> list[dict[str, Any]]:
    params = req.action.params
    if not params:
        return []
    items: list[dict[str, Any]] = []
    used = 0
    for name, value in list(params.items())[:PARAMS_SHOWN_MAX]:
        item = rt_section(
            rt_text(clip(visible(str(name)), 100), bold=True),  # marked first: budgets count what shows
            rt_text(": " + cut(visible(show_value(value)), PARAM_VALUE_MAX)),
        )
        size = text_length(item)
        if used + size > PARAMS_BUDGET:
            break
        items.append(item)
        used += size
    elements = [rt_section(rt_text("Parameters", bold=True)), rt_bullets(items)]
    if len(items) < len(params):
        elements.append(note(more(len(params) - len(items), "parameters")))
    return [rich_text(*elements)]


def _reasoning(req: Request) -> list[dict[str, Any]]:
    if not req.context or not req.context.strip():
        return []
    return [_titled_quote("Agent's reasoning", cut(visible(req.context.strip()), REASONING_BUDGET))]


def _titled_quote(title: str, text: str) -> dict[str, Any]:
    return rich_text(rt_section(rt_text(title, bold=True)), rt_quote(text))


def _buttons(req: Request) -> dict[str, Any]:
    if len(req.id) > BUTTON_VALUE_MAX:
        raise ValueError("request id too long for a button value")
    offered = allowed_decisions(req.kind, req.extra)  # only what the agent allows (bot/domain/choices.py)
    buttons = []
    if "approve" in offered:
        buttons.append(_button("Approve", APPROVE_CONFIRM if req.confirm else APPROVE, req.id, "primary"))
    if "edit" in offered and req.action.params and req.quorum <= 1:  # a quorum approves one set of parameters
        buttons.append(_button("Approve with edits" if "approve" not in offered else "Edit", EDIT, req.id))
    if "respond" in offered:
        buttons.append(_button("Reply instead", RESPOND, req.id))
    if "reject" in offered:
        buttons.append(_button("Reject", REJECT, req.id, "danger"))
    if req.timing is not None:  # requests with a timeline: for approvers, not a decision
        if req.timing.reminds:
            buttons.append(_button("Snooze 1h", SNOOZE, req.id))
        buttons.append(_button("Escalate", ESCALATE, req.id))
    return {"type": "actions", "block_id": DECIDE_BLOCK, "elements": buttons}


def _button(label: str, action_id: str, value: str, style: str | None = None) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": label},
        "value": value,
    }
    if style:
        button["style"] = style
    return button


def _decided(req: Request, outcome: Outcome) -> list[dict[str, Any]]:
    """The outcome line (who, when, how), then what changed and the comment."""
    emoji, label = OUTCOME_LABEL[outcome]
    decision = req.decision
    if decision is not None and decision.via is Via.REPLY:
        emoji, label = "↩️", "Replied instead"
    line = f"{emoji} *{label}*"
    if decision is not None:
        line += f" {_who(decision)} {slack_date(decision.decided_at, '{date_short_pretty} at {time}')}"
        line += _how(decision)
        if len(decision.votes) > 1:  # quorum: everyone who approved, in order
            line += f" · approved by {progress_text(decision.votes, len(decision.votes)).split(': ', 1)[-1]}"
    section = {"type": "section", "text": {"type": "mrkdwn", "text": clip(line, SECTION_TEXT_MAX)}}
    blocks: list[dict[str, Any]] = [section]
    ran = outcome_of(req.extra)
    if ran is not None and decision is not None and ran.status in (RanStatus.RAN, RanStatus.SKIPPED):
        blocks += ran_blocks(ran, decision)  # an execution receipt (bot.slack.receipts)
    elif ran is not None and decision is not None:  # it did not succeed when it ran (bot.domain.outcomes)
        said = f"⚠️ *{label} {_who(decision)}, {ran_text(ran)}:*"
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": clip(said, SECTION_TEXT_MAX)}})
        blocks.append(rich_text(rt_quote(cut(ran.error, RAN_ERROR_BUDGET) or "(no error text)")))
    if decision is not None and decision.changes:
        blocks.append(_changes(decision))
    if decision is not None and decision.comment and decision.comment.strip():
        title = "Reply" if decision.via is Via.REPLY else "Reason" if outcome is Outcome.REJECTED else "Comment"
        blocks.append(_titled_quote(title, cut(decision.comment.strip(), COMMENT_BUDGET)))
    return blocks


def ran_text(ran: RunOutcome) -> str:
    """'then failed when run' (what follows "Approved by X")."""
    if ran.status is RanStatus.RAN:
        return "then ran" + (" with different parameters" if ran.same_params is False else "")
    if ran.status is RanStatus.SKIPPED:
        return "then not run"
    return "then failed when run" if ran.status is RanStatus.FAILED else "then its outcome is unknown"


def _who(decision: Decision) -> str:
    actor: Actor | None = decision.decided_by
    if actor is None:
        return {Via.POLICY: "by policy", Via.GRANT: "by a standing grant"}.get(decision.via, "automatically")
    if _SLACK_USER_ID.match(actor.id):
        return f"by <@{actor.id}>"  # our own id from Slack's payload, safe to mention
    return f"by {escape_mrkdwn(clip(one_line(actor.name or actor.id), 80))}"


_VIA_TEXT = {
    Via.API: "from the API",
    Via.TIMEOUT: "on timeout",
    Via.GRANT: "under a standing grant",
    Via.POLICY: "under policy",
    Via.REPLY: "the action did not run",
}


def _how(decision: Decision) -> str:
    if decision.via is Via.MODAL:
        return " · with edits" if decision.changes else ""
    if decision.decided_by is None and decision.via in (Via.POLICY, Via.GRANT):
        return ""  # `_who` already said "by policy" / "by a standing grant"
    via = _VIA_TEXT.get(decision.via)
    return f" · {via}" if via else ""


def _changes(decision: Decision) -> dict[str, Any]:
    changes = decision.changes
    items: list[dict[str, Any]] = []
    used = 0
    for change in changes[:CHANGES_SHOWN_MAX]:
        item = rt_section(
            rt_text(clip(change.field, 100), bold=True),
            rt_text(": " + _short(change.before) + " → " + _short(change.after)),
        )
        size = text_length(item)
        if used + size > CHANGES_BUDGET:
            break
        items.append(item)
        used += size
    elements = [rt_section(rt_text("Changes", bold=True)), rt_bullets(items)]
    if len(items) < len(changes):
        elements.append(note(more(len(changes) - len(items), "changes")))
    return rich_text(*elements)


def _short(value: Any) -> str:
    return "(none)" if value is None else clip(one_line(show_value(value)), CHANGE_VALUE_MAX)
