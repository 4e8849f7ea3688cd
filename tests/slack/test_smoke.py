from __future__ import annotations

import asyncio

from tests.support.app import App
from tests.support.waits import long_poll_registered


async def test_submit_card_click_resume(app: App) -> None:
    req = await app.submit()
    assert req["status"] == "pending"
    card = await app.card(req["id"])
    assert card.channel == "C1"
    waiter = asyncio.create_task(app.api("GET", f"/api/v1/approvals/{req['id']}?wait=10"))
    await long_poll_registered(app.url)
    resp = await app.click(req["id"], "U1")
    assert resp.status == 200, resp.text
    status, body = await waiter
    assert status == 200
    assert body["status"] == "approved"
    assert body["decision"]["decided_by"]["id"] == "U1"
    assert body["decision"]["via"] == "button"
    await app.slack.wait_for("chat.update")
