"""Concurrent long-polls are capped per token and per process: 429 with Retry-After (issue 9, defect 8)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest_asyncio

from bot.api.longpoll import LIMITS
from bot.sandbox import SlackEmulator as FakeSlack
from tests.support.app import API_TOKEN, App, start_app
from tests.support.waits import until

OTHER_TOKEN = "test-api-token-2"


@pytest_asyncio.fixture
async def capped(db_url: str, slack: FakeSlack) -> AsyncIterator[App]:
    running = await start_app(db_url, slack, SIGNOFF_API_TOKENS=f"{API_TOKEN},{OTHER_TOKEN}",
                              SIGNOFF_LONGPOLL_PER_TOKEN="3", SIGNOFF_LONGPOLL_MAX="5")
    try:
        yield running
    finally:
        await running.stop()


async def held(app: App, count: int) -> None:
    """Until `count` long-polls are being held (the observable state)."""
    assert app.signoff is not None
    limits = app.signoff.web_app[LIMITS]
    await until(lambda: limits.held == count, f"{count} long-polls to be held")


async def test_long_polls_past_the_caps_get_429_and_the_held_ones_still_answer(capped: App) -> None:
    app = capped
    req = await app.submit()
    path = f"/api/v1/approvals/{req['id']}?wait=30"
    other = {"Authorization": f"Bearer {OTHER_TOKEN}"}
    polls = [asyncio.create_task(app.api("GET", path)) for _ in range(3)]
    await held(app, 3)
    async with app.session.get(app.url + path, headers=app.headers) as resp:
        assert resp.status == 429 and resp.headers["Retry-After"] == "1"
        assert (await resp.json())["error"]["code"] == "too_many_long_polls"
    polls += [asyncio.create_task(app.api("GET", path, headers=other)) for _ in range(2)]
    await held(app, 5)
    status, body = await app.api("GET", path, headers=other)  # the token has room; the process has not
    assert status == 429 and "maximum of 5" in body["error"]["message"]
    status, body = await app.api("GET", f"/api/v1/approvals/{req['id']}")  # no wait: never limited
    assert status == 200
    await app.click(req["id"], "U1")
    answers = await asyncio.wait_for(asyncio.gather(*polls), 30)
    assert [(s, b["status"]) for s, b in answers] == [(200, "approved")] * 5
    await held(app, 0)
