"""A server shutting down (a deploy, a replica scaled in) answers its held long-polls at once with the state
they have, instead of holding the shutdown for up to each poll's wait: the agent polls again, elsewhere or
after the restart."""

from __future__ import annotations

import asyncio

import aiohttp

from bot.sandbox import SlackEmulator
from tests.support.app import API_TOKEN, start_app
from tests.support.waits import waiting_on


async def test_a_shutdown_answers_a_held_long_poll_with_its_pending_state(db_url: str, slack: SlackEmulator) -> None:
    app = await start_app(db_url, slack)
    stopped = False
    try:
        req = await app.submit()
        async with aiohttp.ClientSession() as agent:  # the agent's own connection, not the test app's session
            poll = asyncio.create_task(agent.get(f"{app.url}/api/v1/approvals/{req['id']}?wait=60",
                                                 headers={"Authorization": f"Bearer {API_TOKEN}"}))
            await waiting_on(app, req["id"])
            stopping = asyncio.create_task(app.stop())
            # Without the shutdown's answer both would take the poll's 60 s (aiohttp waits for handlers).
            response = await asyncio.wait_for(poll, 30)
            await asyncio.wait_for(stopping, 30)
            stopped = True
            assert response.status == 200
            body = await response.json()
            assert body["id"] == req["id"] and body["status"] == "pending", body
    finally:
        if not stopped:
            await app.stop()
