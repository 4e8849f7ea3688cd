"""What people do on a batch card, as signed Slack payloads: tick and approve, and each item's own buttons."""

from __future__ import annotations

from typing import Any

from bot.sandbox.signed import checkboxes
from tests.support.app import App
from tests.support.waits import until

NAMES = {"U1": "alice", "U2": "bob"}


def ticked(indexes: list[int]) -> dict[str, Any]:
    return {f"item:{i}": {"signoff_item_pick": checkboxes(["approve"])} for i in indexes}


def controls(message: Any, index: int) -> list[str]:
    """The action ids an item shows: checkbox, Edit, Reject, Reply (only those it offers)."""
    return [e["action_id"] for b in message.blocks if b.get("block_id") == f"item:{index}" for e in b["elements"]]


async def click_item(app: App, request_id: str, index: int, action: str, user: str = "U1") -> Any:
    card = await app.card(request_id)
    return await app.slack_client.block_action(user=user, user_name=NAMES.get(user), action_id=action,
                                               value=request_id, block_id=f"item:{index}", channel=card.channel,
                                               message_ts=card.ts)


async def open_item(app: App, request_id: str, index: int, action: str, user: str = "U1") -> dict[str, Any]:
    """Click an item's Edit / Reject / Reply and return the modal Slack was asked to open."""
    before = len(app.slack.calls_to("views.open"))
    await click_item(app, request_id, index, action, user)
    return dict((await app.slack.wait_for("views.open", count=before + 1))[-1].args["view"])


async def submit(app: App, view: dict[str, Any], values: dict[str, Any], user: str = "U1",
                 private_metadata: str | None = None) -> Any:
    return await app.slack_client.view_submission(
        user=user, user_name=NAMES.get(user), callback_id=view["callback_id"], values=values,
        private_metadata=view["private_metadata"] if private_metadata is None else private_metadata)


async def approve_selected(app: App, request_id: str, indexes: list[int], user: str = "U1") -> Any:
    card = await app.card(request_id)
    return await app.slack_client.block_action(
        user=user, user_name=NAMES.get(user), action_id="signoff_batch_approve", value=request_id,
        block_id="batch:0", channel=card.channel, message_ts=card.ts, state_values=ticked(indexes))


async def item_state(app: App, request_id: str, index: int) -> dict[str, Any]:
    """The action once it is decided (the modal's ack comes before the write: wait for it, test-side)."""
    async def decided() -> dict[str, Any] | None:
        _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
        return dict(body["items"][index]) if body["items"][index]["outcome"] is not None else None

    return await until(decided, f"action {index + 1} of {request_id} to be decided")
