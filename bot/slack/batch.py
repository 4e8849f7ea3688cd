"""Clicks and modals of batch cards: Approve selected, Reject all, and each item's own decision.

Listeners ack first (the item checkboxes only ack: their state is read from the click on
"Approve selected", so what is approved is exactly what was ticked on that message). An item's
Edit (edit and approve), Reject (with a reason) and Reply (answer in its place) open a modal
about that item alone; its submission decides that item, checked before the ack (inline errors)
against the item's own offered decisions and schema. Every refusal is an ephemeral note or an
inline modal error and writes nothing; a choice is only ever all written or not at all.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from slack_bolt.async_app import AsyncApp

from bot.approvals.access import PRE_ACK_LOOKUP_SECONDS
from bot.approvals.batches import decide_item, decide_items_of
from bot.approvals.checked import Recheck
from bot.domain.batch import Choice, choice_refusal
from bot.domain.duties import approve_refusal
from bot.domain.model import Action, Actor, Outcome, Request, Via
from bot.approvals.service import DecideResult
from bot.slack import blocks
from bot.slack.batch_blocks import (
    BATCH_APPROVE,
    BATCH_REJECT,
    ITEM_BLOCK,
    ITEM_EDIT,
    ITEM_PICK,
    ITEM_REJECT,
    ITEM_RESPOND,
    PAGE_BLOCK,
    page_count,
    selection,
    selection_refusal,
)
from bot.domain.batch import page_ts
from bot.slack.interactions import Interactions, Refusal, already_decided_text
from bot.slack.payloads import BadPayload, Click, extract_click, extract_submission
from bot.slack.text import mention, strip_markup

log = logging.getLogger(__name__)

BATCH_EDIT_VIEW = "signoff_batch_edit"
BATCH_REJECT_VIEW = "signoff_batch_reject"
ITEM_REJECT_VIEW = "signoff_item_reject"
ITEM_RESPOND_VIEW = "signoff_item_respond"
REASON_MAX = 2000

# An item's modal: what it decides, as `bot.domain.choices` names it.
_VIEW_DECISION = {BATCH_EDIT_VIEW: "edit", ITEM_REJECT_VIEW: "reject", ITEM_RESPOND_VIEW: "respond"}


class BatchInteractions:
    def __init__(self, interactions: Interactions) -> None:
        self.interactions = interactions
        self.service = interactions.service

    async def _clicked(self, body: dict[str, Any], prefix: str) -> tuple[Click, Request, int] | None:
        """The click, its pending batch and the page or item number its block names; else None (told why)."""
        try:
            click = extract_click(body)
        except BadPayload as exc:
            user = (body.get("user") or {}).get("id")
            if user:
                await self.interactions.tell(user, (body.get("channel") or {}).get("id"),
                                             f"That button could not be used: {exc}. Nothing was changed.")
            return None
        checked = await self.interactions.check(click.request_id, click.user_id)
        if isinstance(checked, Refusal):
            await self.interactions.tell(click.user_id, click.channel_id, checked.text)
            return None
        block_id = str(((body.get("actions") or [{}])[0]).get("block_id") or "")
        number = block_id.removeprefix(prefix)
        limit = page_count(checked) if prefix == PAGE_BLOCK else len(checked.items)
        ours = {checked.card_ts, *(page_ts(checked, p) for p in range(1, page_count(checked)))}
        wrong_message = click.view_id is None and click.message_ts is not None and checked.card_ts is not None \
            and click.message_ts not in ours
        if not checked.is_batch or not block_id.startswith(prefix) or not number.isdigit() \
                or not 0 <= int(number) < limit or wrong_message:
            await self.interactions.tell(click.user_id, click.channel_id,
                                         "This button does not belong to this batch card. Nothing was changed.")
            return None
        return click, checked, int(number)

    # -- a page: Approve selected, Reject all ------------------------------------------

    async def approve_selected(self, body: dict[str, Any]) -> None:
        clicked = await self._clicked(body, PAGE_BLOCK)
        if clicked is None:
            return
        click, request, page = clicked
        state = ((body.get("state") or {}).get("values")) or {}
        chosen = selection(request, page, state)
        refusal = selection_refusal(request, chosen)
        if refusal is None and Outcome.APPROVED in chosen.values():
            refusal = approve_refusal(request, click.user_id)
        if refusal is not None:
            await self.interactions.tell(click.user_id, click.channel_id, refusal)
            return
        result = await decide_items_of(
            self.service, request.id,
            lambda r: {i: Choice(o, via=Via.BUTTON) for i, o in selection(r, page, state).items()},
            actor=Actor(click.user_id, click.user_name), via=Via.BUTTON,
            recheck=self._recheck(click.user_id, approving=Outcome.APPROVED in chosen.values()))
        await self._report(click.user_id, click.channel_id, result)

    def _recheck(self, user_id: str, *, approving: bool, what: str = "click") -> Recheck:
        """Whether `user_id` may still decide, on each state a choice is written on (bot/approvals/checked.py)."""
        async def recheck(state: Request) -> str | None:
            refusal = await self.interactions.refusal(state, user_id, what=what)
            return approve_refusal(state, user_id) if refusal is None and approving else refusal
        return recheck

    async def _report(self, user: str, channel: str | None, result: DecideResult) -> None:
        request, won, counted = result.request, result.won, result.counted
        if result.refused is not None:
            await self.interactions.tell(user, channel, result.refused)
        elif counted:
            waiting = sum(i.outcome is None for i in request.items)
            await self.interactions.tell(user, channel, f"Recorded. {waiting} more "
                                         f"{'action waits' if waiting == 1 else 'actions wait'} for a decision.")
        elif not won:
            text = already_decided_text(request) if not request.is_pending else \
                "Everything on this page was already decided. Nothing was changed."
            await self.interactions.tell(user, channel, text)

    async def open_reject(self, body: dict[str, Any]) -> None:
        clicked = await self._clicked(body, PAGE_BLOCK)
        if clicked is None:
            return
        click, request, _ = clicked
        refusal = _reject_all_refusal(request)
        if refusal is not None:
            await self.interactions.tell(click.user_id, click.channel_id, refusal)
            return
        view = blocks.reject_modal(request)
        view["callback_id"] = BATCH_REJECT_VIEW
        view["title"]["text"] = "Reject all"
        await self.interactions.open_view(click, request, view)

    async def finish_reject(self, body: dict[str, Any]) -> None:
        sub = extract_submission(body)
        channel = sub.channel_id
        checked = await self.interactions.check(sub.request_id, sub.user_id)
        if isinstance(checked, Refusal):
            await self.interactions.tell(sub.user_id, channel, checked.text)
            return
        refusal = _reject_all_refusal(checked)
        if refusal is not None:
            await self.interactions.tell(sub.user_id, channel, refusal)
            return
        reason = (blocks.parse_reject_submission(sub.values) or "")[:REASON_MAX] or None
        result = await decide_items_of(
            self.service, checked.id,
            lambda r: {i: Choice(Outcome.REJECTED, Via.MODAL, reason) for i, item in enumerate(r.items)
                       if item.outcome is None},
            actor=Actor(sub.user_id, sub.user_name), via=Via.MODAL, comment=reason,
            recheck=self._recheck(sub.user_id, approving=False, what="answer"))
        await self._report(sub.user_id, channel, result)

    # -- one item: Edit (and approve), Reject, Reply -------------------------------------

    async def open_item(self, body: dict[str, Any], decision: str) -> None:
        """The modal of one item's `decision` (edit, reject or respond), if that item offers it."""
        clicked = await self._clicked(body, ITEM_BLOCK)
        if clicked is None:
            return
        click, request, index = clicked
        refusal = choice_refusal(index, request.items[index], decision)
        if refusal is None and decision == "edit":
            refusal = approve_refusal(request, click.user_id)
        if refusal is not None:
            await self.interactions.tell(click.user_id, click.channel_id, _nothing_changed(refusal))
            return
        pseudo = as_request(request, index)
        number = index + 1
        if decision == "edit":
            view = blocks.edit_modal(pseudo)
            view["callback_id"], view["title"]["text"] = BATCH_EDIT_VIEW, f"Edit action {number}"
        elif decision == "reject":
            view = blocks.reject_modal(pseudo)
            view["callback_id"], view["title"]["text"] = ITEM_REJECT_VIEW, f"Reject action {number}"
        else:
            view = blocks.respond_modal(pseudo)
            view["callback_id"], view["title"]["text"] = ITEM_RESPOND_VIEW, f"Reply to action {number}"
        await self.interactions.open_view(click, request, view, item=index)

    async def check_item(self, body: dict[str, Any]) -> tuple[Request | None, int, Choice | None, dict[str, str]]:
        """Before the ack: (request, item, the choice to record, inline errors); errors mean nothing is written."""
        sub = extract_submission(body)
        decision = _VIEW_DECISION[sub.callback_id]
        first = "reason" if decision != "edit" else next(iter(sub.values), "reason")
        meta = json.loads((body.get("view") or {}).get("private_metadata") or "{}")
        index = meta.get("item")
        checked = await self.interactions.check(sub.request_id, sub.user_id, within=PRE_ACK_LOOKUP_SECONDS,
                                                what="answer")
        if isinstance(checked, Refusal):
            return None, 0, None, {first: strip_markup(checked.text)[:2000]}
        if not checked.is_batch or not isinstance(index, int) or not 0 <= index < len(checked.items):
            return None, 0, None, {first: "This form does not belong to an action of this batch. Nothing was changed."}
        refusal = choice_refusal(index, checked.items[index], decision)
        if refusal is None and decision == "edit":
            refusal = approve_refusal(checked, sub.user_id)
        if refusal is not None:
            return None, 0, None, {first: strip_markup(refusal)[:2000]}
        if decision == "edit":
            pseudo = as_request(checked, index)
            params, errors = blocks.parse_edit_submission(pseudo, sub.values)
            if not errors:
                problem = await self.service.recheck_edit(pseudo, params)  # policy re-evaluates the edit (12a)
                if problem:
                    errors = {first: strip_markup(problem)[:2000]}
            if errors:
                return None, 0, None, errors
            return checked, index, Choice(Outcome.APPROVED, Via.MODAL, params=params), {}
        text = blocks.parse_reject_submission(sub.values)
        if text is not None and len(text) > REASON_MAX:
            return None, 0, None, {"reason": f"must be at most {REASON_MAX} characters (this is {len(text)})"}
        if decision == "respond":
            if not text:
                return None, 0, None, {"reason": "Write the reply the agent should get."}
            return checked, index, Choice(Outcome.REJECTED, Via.REPLY, text), {}
        return checked, index, Choice(Outcome.REJECTED, Via.MODAL, text), {}

    async def finish_item(self, body: dict[str, Any], request: Request, index: int, choice: Choice) -> None:
        sub = extract_submission(body)
        channel = sub.channel_id or request.card_channel
        checks = self._recheck(sub.user_id, approving=choice.outcome is Outcome.APPROVED, what="answer")

        async def recheck(state: Request) -> str | None:
            refusal = await checks(state)
            if (refusal is None and choice.params is not None and 0 <= index < len(state.items)
                    and state.items[index].outcome is None):  # a taken action is told so by decide_item
                # An edit, again as it is decided: a deny made since its form was checked holds.
                problem = await self.service.recheck_edit(as_request(state, index), choice.params, form_open=False)
                if problem:
                    return _nothing_changed(problem)
            return refusal

        result = await decide_item(self.service, request.id, index, choice, actor=Actor(sub.user_id, sub.user_name),
                                   recheck=recheck)
        if result.refused is not None:
            await self.interactions.tell(sub.user_id, channel, result.refused)
        elif not result.won:
            await self.interactions.tell(sub.user_id, channel, _item_taken(result.request, index))


def as_request(request: Request, index: int) -> Request:
    """One item as a request of its own (its current parameters as the proposal): for its modals."""
    item = request.items[index]
    return request.evolve(action=Action(item.action.name, item.final_params, item.action.params_schema),
                          summary=f"Action {index + 1} of {len(request.items)}: {item.action.name}", items=())


def _reject_all_refusal(request: Request) -> str | None:
    """"Reject all" only when every undecided action may be rejected: never half of them."""
    problems = [r for i, item in enumerate(request.items)
                if item.outcome is None and (r := choice_refusal(i, item, "reject")) is not None]
    if not problems:
        return None
    return (" ".join(problems[:3]) + " Decide " + ("it" if len(problems) == 1 else "them")
            + " with " + ("its" if len(problems) == 1 else "their") + " own buttons first. Nothing was changed.")


def _nothing_changed(text: str) -> str:
    return text if text.endswith("Nothing was changed.") or "not recorded" in text else f"{text} Nothing was changed."


def _item_taken(request: Request, index: int) -> str:
    """What the loser of a race for one item is told."""
    if not request.is_pending:
        return already_decided_text(request)
    item = request.items[index]
    word = "answered with a reply" if item.via is Via.REPLY else item.outcome.value if item.outcome else "decided"
    who = f" by {mention(item.decided_by.id)}" if item.decided_by else ""
    return f"Action {index + 1} was already {word}{who}. Nothing was changed."


def register(app: AsyncApp, batch: BatchInteractions) -> None:
    async def on_pick(ack: Any) -> None:
        await ack()  # a tick is read from the message's state when "Approve selected" is clicked

    async def on_approve(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        await batch.approve_selected(body)

    async def on_reject(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        await batch.open_reject(body)

    def on_item(decision: str) -> Any:
        async def listener(ack: Any, body: dict[str, Any]) -> None:
            await ack()
            await batch.open_item(body, decision)  # views.open straight away: the trigger_id lives 3 s

        return listener

    async def on_item_submit(ack: Any, body: dict[str, Any]) -> None:
        try:
            request, index, choice, errors = await batch.check_item(body)
        except (BadPayload, ValueError) as exc:
            await ack(response_action="errors", errors={_first_block(body): str(exc)[:2000]})
            return
        if errors or request is None or choice is None:
            await ack(response_action="errors", errors=errors)
            return
        await ack()
        await batch.finish_item(body, request, index, choice)

    async def on_reject_submit(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        try:
            await batch.finish_reject(body)
        except BadPayload:
            log.warning("batch reject submission without a request id")

    app.action(ITEM_PICK)(on_pick)
    app.action(BATCH_APPROVE)(on_approve)
    app.action(BATCH_REJECT)(on_reject)
    app.action(ITEM_EDIT)(on_item("edit"))
    app.action(ITEM_REJECT)(on_item("reject"))
    app.action(ITEM_RESPOND)(on_item("respond"))
    for view in _VIEW_DECISION:
        app.view(view)(on_item_submit)
    app.view(BATCH_REJECT_VIEW)(on_reject_submit)


def _first_block(body: dict[str, Any]) -> str:
    values = ((body.get("view") or {}).get("state") or {}).get("values") or {}
    return next(iter(values), "reason")
