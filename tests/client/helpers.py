"""Helpers shared by the agent-side integration tests."""

from __future__ import annotations

import asyncio

from bot.sandbox import SlackEmulator
from tests.support.app import App


async def pending_id(app: App) -> str:
    """The id of the one pending request, once the server has it (the agent runs in a thread or a process)."""
    for _ in range(1000):
        _, listing = await app.api("GET", "/api/v1/approvals?status=pending")
        if listing["items"]:
            [item] = listing["items"]
            return str(item["id"])
        await asyncio.sleep(0.01)  # test-side: waiting for the agent's submit to land
    raise AssertionError("no pending request appeared")


def cards(slack: SlackEmulator) -> int:
    """How many top-level messages (cards) were posted."""
    return sum(1 for c in slack.calls if c.method == "chat.postMessage" and not c.args.get("thread_ts"))


async def cards_once_posted(app: App, *request_ids: str) -> int:
    """How many cards were posted, counted once each named request's card is stored: the outbox posts
    a card after the submit's answer, so counting straight after a submit races it."""
    for request_id in request_ids:
        await app.card(request_id)
    return cards(app.slack)


async def next_pending(app: App, after: str) -> str:
    """The id of the one pending request other than `after` (decided just now: its decision may still be
    being written when the click's ack arrives)."""
    for _ in range(1000):
        _, listing = await app.api("GET", "/api/v1/approvals?status=pending")
        others = [str(i["id"]) for i in listing["items"] if i["id"] != after]
        if others:
            [found] = others
            return found
        await asyncio.sleep(0.01)  # test-side: waiting for the agent's second submit to land
    raise AssertionError(f"no pending request other than {after} appeared")


async def receipt(app: App, request_id: str) -> dict:
    """The request as the agent API shows it after the click: `outcome` (what ran) and `outcome_status`."""
    status, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert status == 200, body
    return dict(body)


async def card_text(app: App, request_id: str) -> str:
    """The card's blocks as text, once the outbox delivered everything due (a receipt updates the card)."""
    import json

    from tests.support.outbox import settle

    await settle(app)
    return json.dumps((await app.card(request_id)).blocks, ensure_ascii=False)
