"""Clicks and modals of batch cards: Approve selected, Reject all, per-item Edit.

Listeners ack first (the item checkboxes only ack: their state is read from the click on
"Approve selected", so what is approved is exactly what was ticked on that message). Every
refusal is an ephemeral note or an inline modal error and writes nothing.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from slack_bolt.async_app import AsyncApp

from bot.batches import ItemDecided, decide_items_of, edit_item
from bot.domain.duties import approve_refusal
from bot.domain.model import Action, Actor, Outcome, Request, Via
from bot.slack import blocks
from bot.slack.batch_blocks import (
    BATCH_APPROVE,
    BATCH_REJECT,
    ITEM_BLOCK,
    ITEM_EDIT,
    ITEM_PICK,
    PAGE_BLOCK,
    page_count,
    selection,
)
from bot.slack.batch_delivery import page_ts
from bot.slack.interactions import Interactions, Refusal, already_decided_text
from bot.slack.payloads import BadPayload, Click, extract_click, extract_submission

log = logging.getLogger(__name__)

BATCH_EDIT_VIEW = "signoff_batch_edit"
BATCH_REJECT_VIEW = "signoff_batch_reject"


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

    async def approve_selected(self, body: dict[str, Any]) -> None:
        clicked = await self._clicked(body, PAGE_BLOCK)
        if clicked is None:
            return
        click, request, page = clicked
        state = ((body.get("state") or {}).get("values")) or {}
        if Outcome.APPROVED in selection(request, page, state).values():
            refusal = approve_refusal(request, click.user_id)
            if refusal is not None:
                await self.interactions.tell(click.user_id, click.channel_id, refusal)
                return
        result = await decide_items_of(self.service, request.id, lambda r: selection(r, page, state),
                                       actor=Actor(click.user_id, click.user_name), via=Via.BUTTON)
        await self._report(click.user_id, click.channel_id, result.request, result.won, result.counted)

    async def _report(self, user: str, channel: str | None, request: Request, won: bool, counted: bool) -> None:
        if counted:
            waiting = sum(i.outcome is None for i in request.items)
            await self.interactions.tell(user, channel, f"Recorded. {waiting} more "
                                         f"{'action waits' if waiting == 1 else 'actions wait'} on the other pages.")
        elif not won:
            text = already_decided_text(request) if not request.is_pending else \
                "Everything on this page was already decided. Nothing was changed."
            await self.interactions.tell(user, channel, text)

    async def open_reject(self, body: dict[str, Any]) -> None:
        clicked = await self._clicked(body, PAGE_BLOCK)
        if clicked is not None:
            click, request, _ = clicked
            view = blocks.reject_modal(request)
            view["callback_id"] = BATCH_REJECT_VIEW
            view["title"]["text"] = "Reject all"
            await self.interactions.open_view(click, request, view)

    async def open_edit(self, body: dict[str, Any]) -> None:
        clicked = await self._clicked(body, ITEM_BLOCK)
        if clicked is None:
            return
        click, request, index = clicked
        outcome = request.items[index].outcome
        if outcome is not None:
            await self.interactions.tell(click.user_id, click.channel_id, f"Action {index + 1} is already "
                                         f"{outcome.value}. Nothing was changed.")
            return
        view = blocks.edit_modal(as_request(request, index))
        view["callback_id"] = BATCH_EDIT_VIEW
        view["title"]["text"] = f"Edit action {index + 1}"[:24]
        view["submit"]["text"] = "Save"
        await self.interactions.open_view(click, request, view, item=index)

    async def check_edit(self, body: dict[str, Any]) -> tuple[Request | None, int, dict[str, Any], dict[str, str]]:
        """Before the ack: (request, item, new params, inline errors); errors mean nothing is written."""
        sub = extract_submission(body)
        first = next(iter(sub.values), "reason")
        meta = json.loads((body.get("view") or {}).get("private_metadata") or "{}")
        index = meta.get("item")
        checked = await self.interactions.check(sub.request_id, sub.user_id)
        if isinstance(checked, Refusal):
            return None, 0, {}, {first: checked.text[:2000]}
        if not isinstance(index, int) or not 0 <= index < len(checked.items):
            return None, 0, {}, {first: "This form does not belong to an action of this batch."}
        outcome = checked.items[index].outcome
        if outcome is not None:
            return None, 0, {}, {first: f"Action {index + 1} is already {outcome.value}."}
        pseudo = as_request(checked, index)
        params, errors = blocks.parse_edit_submission(pseudo, sub.values)
        if not errors:
            problem = self.service.recheck_edit(pseudo, params)  # policy re-evaluates the edit (12a)
            if problem:
                errors = {first: problem[:2000]}
        return (None, index, {}, errors) if errors else (checked, index, params, {})

    async def finish_edit(self, body: dict[str, Any], request: Request, index: int, params: dict[str, Any]) -> None:
        sub = extract_submission(body)
        channel = sub.channel_id or request.card_channel
        if not await self.service.may_decide(request, sub.user_id):
            await self.interactions.tell(sub.user_id, channel, "You are not one of the approvers of this request, "
                                         "so your edit was not recorded.")
            return
        try:
            result = await edit_item(self.service, request.id, index, params, actor=Actor(sub.user_id, sub.user_name))
        except ItemDecided as exc:
            await self.interactions.tell(sub.user_id, channel, f"Your edit was not recorded: {exc}.")
            return
        if not result.won:
            await self.interactions.tell(sub.user_id, channel, already_decided_text(result.request))

    async def finish_reject(self, body: dict[str, Any]) -> None:
        sub = extract_submission(body)
        channel = sub.channel_id
        checked = await self.interactions.check(sub.request_id, sub.user_id)
        if isinstance(checked, Refusal):
            await self.interactions.tell(sub.user_id, channel, checked.text)
            return
        reason = blocks.parse_reject_submission(sub.values)
        result = await decide_items_of(
            self.service, checked.id,
            lambda r: {i: Outcome.REJECTED for i, item in enumerate(r.items) if item.outcome is None},
            actor=Actor(sub.user_id, sub.user_name), via=Via.MODAL, comment=reason)
        await self._report(sub.user_id, channel, result.request, result.won, result.counted)


def as_request(request: Request, index: int) -> Request:
    """One item as a request of its own (its current parameters as the proposal): for the edit form."""
    item = request.items[index]
    return request.evolve(action=Action(item.action.name, item.final_params, item.action.params_schema),
                          summary=f"Action {index + 1} of {len(request.items)}: {item.action.name}", items=())


def register(app: AsyncApp, batch: BatchInteractions) -> None:
    async def on_pick(ack: Any) -> None:
        await ack()  # a tick is read from the message's state when "Approve selected" is clicked

    async def on_approve(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        await batch.approve_selected(body)

    async def on_reject(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        await batch.open_reject(body)

    async def on_edit(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        await batch.open_edit(body)

    async def on_edit_submit(ack: Any, body: dict[str, Any]) -> None:
        try:
            request, index, params, errors = await batch.check_edit(body)
        except (BadPayload, ValueError) as exc:
            await ack(response_action="errors", errors={_first_block(body): str(exc)[:2000]})
            return
        if errors or request is None:
            await ack(response_action="errors", errors=errors)
            return
        await ack()
        await batch.finish_edit(body, request, index, params)

    async def on_reject_submit(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        try:
            await batch.finish_reject(body)
        except BadPayload:
            log.warning("batch reject submission without a request id")

    app.action(ITEM_PICK)(on_pick)
    app.action(BATCH_APPROVE)(on_approve)
    app.action(BATCH_REJECT)(on_reject)
    app.action(ITEM_EDIT)(on_edit)
    app.view(BATCH_EDIT_VIEW)(on_edit_submit)
    app.view(BATCH_REJECT_VIEW)(on_reject_submit)


def _first_block(body: dict[str, Any]) -> str:
    values = ((body.get("view") or {}).get("state") or {}).get("values") or {}
    return next(iter(values), "reason")
