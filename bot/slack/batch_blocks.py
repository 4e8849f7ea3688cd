"""Block Kit for batch requests: one card with a line and a decision per item, in pages.

Page 0 is the card itself (header, who/risk/when, notes, the agent's reasoning, items, buttons);
pages 1.. are continuation messages in the card's thread, each with its own items and buttons.
A page holds at most ITEMS_PER_PAGE items of at most two blocks each (the item's line, then
either its controls while it waits, or the reason / reply it was decided with), so every message
stays within Slack's 50 blocks and the text budget of `bot.slack.blocks` (the notes get what the
rest leaves); items are never dropped, only spread over more pages.

An undecided item shows only the controls of the decisions it offers (`bot.domain.batch.offered`):
an "Approve" checkbox, Edit (edit and approve that item), Reject (with a reason) and Reply
(answer in place of the action). "Approve selected" decides the undecided items of its own page
(ticked: approved; not ticked: rejected), "Reject all" every undecided item. Checkboxes start
unticked: what is approved is exactly what the person ticked. Agent text is plain_text only.

While the batch's approval waits in its undo window (bot/domain/undo.py), the items show as that click
decided them, without controls, and page 0 ends with "runs in N s · Undo" (bot/slack/undo_blocks.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.domain.batch import Item, choice_refusal, offered, pages
from bot.domain.model import Outcome, Request, Via
from bot.domain.outcomes import RanStatus, outcome_of
from bot.slack import blocks as card
from bot.domain.undo import held
from bot.slack.duties import duty_notes
from bot.slack.undo_blocks import held_blocks, undo_notes
from bot.slack.previews import clip, escape_mrkdwn, neutralise, one_line, plain, show_value, text_length

ITEMS_PER_PAGE = 20
ITEM_LINE_MAX = 280
ITEM_PARAMS_SHOWN = 6
PARAM_VALUE_MAX = 60

BATCH_APPROVE = "signoff_batch_approve"
BATCH_REJECT = "signoff_batch_reject"
ITEM_EDIT = "signoff_item_edit"
ITEM_REJECT = "signoff_item_reject"
ITEM_RESPOND = "signoff_item_respond"
ITEM_PICK = "signoff_item_pick"
ITEM_NOTE_MAX = 200  # an item's reason or reply on the card (all of it is in the API)
PAGE_BLOCK = "batch:"  # + page number: the block of a page's buttons
ITEM_BLOCK = "item:"  # + item index: the block of an item's checkbox and Edit button
APPROVE_VALUE = "approve"

_OUTCOME_MARK = {Outcome.APPROVED: "✅", Outcome.REJECTED: "❌"}
REPLY_MARK = "↩️"
FAILED_MARK = "⚠️"


def page_count(req: Request) -> int:
    return len(pages(len(req.items), ITEMS_PER_PAGE))


def page_items(req: Request, page: int) -> range:
    return pages(len(req.items), ITEMS_PER_PAGE)[page]


def batch_page(req: Request, page: int, *, now: datetime, notes: list[str] | None = None) -> dict[str, Any]:
    """Message `page` of a batch request: {"text", "blocks"} (page 0 is the card)."""
    indexes = page_items(req, page)
    total = page_count(req)
    decided = not req.is_pending
    approval = held(req)
    shown = req.evolve(items=approval.items) if approval is not None and approval.items else req
    out: list[dict[str, Any]] = []
    if page == 0:
        out.append(card._header(req))
        out.append(card._context_line(req, now))
        notes = [*(notes or []), *duty_notes(req), *undo_notes(req)]
        if notes:
            out.append(card._notes(notes))
        out.extend(card._reasoning(req))
    label = f"{len(req.items)} actions" if total == 1 else (
        f"Actions {indexes.start + 1}–{indexes.stop} of {len(req.items)} · page {page + 1} of {total}")
    if page == 0 and total > 1:
        label += " (the others are in this thread)"
    out.append({"type": "context", "elements": [{"type": "mrkdwn", "text": label}]})
    rows = [(i, _item_blocks(shown, i)) for i in indexes]
    bottom: list[dict[str, Any]]
    if decided:
        bottom = card._decided(req, card._outcome(req) or Outcome.REJECTED) if page == 0 else []
    elif approval is not None:
        bottom = held_blocks(req, now) if page == 0 else [{"type": "context", "elements": [
            {"type": "mrkdwn", "text": "Approved: runs when its undo window ends, unless undone on the first page."}]}]
    elif any(req.items[i].outcome is None for i in indexes):
        bottom = [_page_buttons(req, page)]
    else:
        bottom = [{"type": "context", "elements": [
            {"type": "mrkdwn", "text": "Everything on this page is decided; the other pages are waiting."}]}]
    item_notes = {i: n for i in indexes if (n := _note_text(req, i))}
    used = text_length(out) + sum(text_length(b) for _, b in rows) + text_length(bottom)
    room = card.TOTAL_TEXT_BUDGET - card.SAFETY_MARGIN - used
    per_note = min(ITEM_NOTE_MAX, room // max(1, len(item_notes)))
    for i, blocks in rows:
        out.extend(blocks)
        if i in item_notes and per_note > 20:  # else the API still has it; the card has no room
            out.append({"type": "context", "elements": [plain(item_notes[i], limit=per_note)]})
    out.extend(bottom)
    return {"text": _fallback(req, page, total), "blocks": out}


def _fallback(req: Request, page: int, total: int) -> str:
    summary = escape_mrkdwn(clip(one_line(req.summary), card.FALLBACK_SUMMARY_MAX))
    status = "Approval needed" if req.is_pending else (card.OUTCOME_LABEL[card._outcome(req) or Outcome.REJECTED][1])
    suffix = f" (page {page + 1} of {total})" if total > 1 else ""
    return f"{status}: {summary}{suffix}"


def item_line(index: int, item: Item, *, failed: bool = False) -> str:
    """'3. send_email · to: a@example.com, subject: Hi' (plain text: agent content)."""
    params = item.final_params
    shown = [f"{k}: {clip(one_line(show_value(v)), PARAM_VALUE_MAX)}" for k, v in list(params.items())[:ITEM_PARAMS_SHOWN]]
    if len(params) > ITEM_PARAMS_SHOWN:
        shown.append(f"+{len(params) - ITEM_PARAMS_SHOWN} more")
    line = f"{index + 1}. {item.action.name}" + (" · " + ", ".join(shown) if shown else "")
    if item.changes:
        line += " (edited: " + ", ".join(c.field for c in item.changes[:5]) + ")"
    mark = _OUTCOME_MARK.get(item.outcome) if item.outcome else None
    if item.via is Via.REPLY:
        mark = REPLY_MARK
    if failed:  # approved, then it did not succeed when it ran (its note says how)
        mark = FAILED_MARK
    return clip(neutralise(f"{mark} {line}" if mark else line), ITEM_LINE_MAX)


def _note_text(req: Request, index: int) -> str | None:
    """The reason or reply an item was decided with, unless it is the whole batch's own comment."""
    item = req.items[index]
    ran = outcome_of(req.extra, item=item.key) if item.key else None
    if ran is not None:
        actor = item.decided_by or (req.decision.decided_by if req.decision else None)
        who = one_line(actor.name or actor.id) if actor is not None else "policy"
        if ran.status is RanStatus.RAN:
            mark = FAILED_MARK if ran.same_params is False else "▶️"
            return f"{mark} Approved by {who}, {card.ran_text(ran)}"
        return f"{FAILED_MARK} Approved by {who}, {card.ran_text(ran)}: {one_line(ran.error)}"
    comment = (item.comment or "").strip()
    if item.outcome is None or not comment:
        return None
    if req.decision is not None and req.decision.comment and req.decision.comment.strip() == comment:
        return None  # "Reject all" with a reason: shown once, under the card
    label = {Via.REPLY: "Reply", Via.POLICY: "Policy", Via.GRANT: "Policy"}.get(item.via, "Reason") if item.via else "Reason"
    return f"{label}: {one_line(comment)}"


def _item_blocks(req: Request, index: int) -> list[dict[str, Any]]:
    item = req.items[index]
    ran = outcome_of(req.extra, item=item.key) if item.key is not None else None
    failed = ran is not None and (ran.status in (RanStatus.FAILED, RanStatus.UNKNOWN) or ran.same_params is False)
    line = {"type": "section", "text": plain(item_line(index, item, failed=failed), limit=ITEM_LINE_MAX)}
    if not req.is_pending or item.outcome is not None:
        return [line]
    allowed = offered(item)
    elements: list[dict[str, Any]] = []
    if "approve" in allowed:
        option = {"text": {"type": "plain_text", "text": "Approve"}, "value": APPROVE_VALUE}
        elements.append({"type": "checkboxes", "action_id": ITEM_PICK, "options": [option]})
    if "edit" in allowed and (item.final_params or "approve" not in allowed):
        elements.append(card._button("Edit", ITEM_EDIT, req.id))
    if "reject" in allowed:
        elements.append(card._button("Reject", ITEM_REJECT, req.id))
    if "respond" in allowed:
        elements.append(card._button("Reply", ITEM_RESPOND, req.id))
    return [line, {"type": "actions", "block_id": f"{ITEM_BLOCK}{index}", "elements": elements}]


def _page_buttons(req: Request, page: int) -> dict[str, Any]:
    return {"type": "actions", "block_id": f"{PAGE_BLOCK}{page}", "elements": [
        card._button("Approve selected", BATCH_APPROVE, req.id, "primary"),
        card._button("Reject all", BATCH_REJECT, req.id, "danger"),
    ]}


def selection(req: Request, page: int, state_values: dict[str, Any]) -> dict[int, Outcome]:
    """The undecided items of `page` and their outcomes from the message's checkbox state.

    Checkboxes start unticked, so an item whose checkbox is missing from the state counts as not
    ticked, exactly as the person saw it: nothing is approved that they did not tick.
    """
    chosen: dict[int, Outcome] = {}
    for i in page_items(req, page):
        if req.items[i].outcome is not None:
            continue
        state = (state_values.get(f"{ITEM_BLOCK}{i}") or {}).get(ITEM_PICK) or {}
        picked = {o.get("value") for o in state.get("selected_options") or () if isinstance(o, dict)}
        chosen[i] = Outcome.APPROVED if APPROVE_VALUE in picked else Outcome.REJECTED
    return chosen


def selection_refusal(req: Request, chosen: dict[int, Outcome]) -> str | None:
    """Why these ticks cannot be recorded as they are (an item that may not be approved as it is, or
    may not be rejected), or None: "Approve selected" then writes them all, or nothing."""
    problems = []
    for i, outcome in sorted(chosen.items()):
        refusal = choice_refusal(i, req.items[i], "approve" if outcome is Outcome.APPROVED else "reject")
        if refusal is not None:
            hint = " Tick it, or use its own buttons." if outcome is Outcome.REJECTED else ""
            problems.append(refusal + hint)
    if not problems:
        return None
    shown = " ".join(problems[:3]) + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
    return f"{shown} Nothing was changed."
