"""Bolt listeners: ack, parse, delegate. No business logic lives here."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncApp

from bot.slack import blocks
from bot.slack.interactions import Interactions
from bot.slack.payloads import BadPayload, extract_click, extract_submission

log = logging.getLogger(__name__)

HELP = (
    "*Signoff* puts a person between an AI agent and its risky actions.\n"
    "Agents ask over the API; approval cards appear in the channel they name.\n"
    "• `/signoff help`: this message"
)


def register(app: AsyncApp, interactions: Interactions) -> None:
    async def on_approve(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        click = await _click_or_refuse(body)
        if click is not None:
            await interactions.approve(click)

    async def on_edit(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        click = await _click_or_refuse(body)
        if click is not None:
            await interactions.open_modal(click, "edit")

    async def on_reject(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        click = await _click_or_refuse(body)
        if click is not None:
            await interactions.open_modal(click, "reject")

    async def on_submit(ack: Any, body: dict[str, Any]) -> None:
        try:
            sub = extract_submission(body)
        except BadPayload as exc:
            await ack(response_action="errors", errors={_first_block(body): str(exc)})
            return
        request, params, errors = await interactions.check_submission(sub)
        if errors or request is None:
            await ack(response_action="errors", errors=errors)
            return
        await ack()
        await interactions.finish_submission(sub, request, params)

    async def on_command(ack: Any, command: dict[str, Any]) -> None:
        await ack(text=HELP, response_type="ephemeral")

    async def _click_or_refuse(body: dict[str, Any]) -> Any:
        try:
            return extract_click(body)
        except BadPayload as exc:
            user = (body.get("user") or {}).get("id")
            channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
            if user:
                await interactions.tell(user, channel, f"That button could not be used: {exc}. Nothing was changed.")
            return None

    app.action(blocks.APPROVE)(on_approve)
    app.action(blocks.EDIT)(on_edit)
    app.action(blocks.REJECT)(on_reject)
    app.view(blocks.EDIT_VIEW)(on_submit)
    app.view(blocks.REJECT_VIEW)(on_submit)
    app.command("/signoff")(on_command)


def _first_block(body: dict[str, Any]) -> str:
    values = ((body.get("view") or {}).get("state") or {}).get("values") or {}
    return next(iter(values), "reason")
