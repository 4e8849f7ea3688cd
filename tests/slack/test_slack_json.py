"""Slack's Web API calls on the shared session: orjson writes the arguments and reads the answer, and
slack_sdk sees exactly what it saw with the standard library (bot.process.slack_clients.slack_session)."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.process.slack_clients import slack_session


class Api:
    """A Web API on loopback that answers every call with `answer` and keeps what it was sent."""

    def __init__(self) -> None:
        self.answer = '{"ok": true}'
        self.received: list[Any] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append(json.loads(await request.text()))
        return web.Response(text=self.answer, content_type="application/json")


@pytest.fixture
async def api() -> AsyncIterator[tuple[Api, AsyncWebClient]]:
    fake = Api()
    app = web.Application()
    app.router.add_post("/api/{method}", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    session = slack_session(5)
    try:
        yield fake, AsyncWebClient(token="xoxb-test", base_url=f"http://127.0.0.1:{port}/api/", session=session)
    finally:
        await session.close()
        await runner.cleanup()


async def test_the_arguments_arrive_as_sent(api: tuple[Api, AsyncWebClient]) -> None:
    fake, client = api
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "Send *50 %* to Zoë \u2014 \"all\""}}]
    await client.chat_update(channel="C1", ts="1.2", text="Zoë", blocks=blocks,
                             metadata={"event_type": "signoff", "event_payload": {"amount": 2**70}})
    assert fake.received == [{"channel": "C1", "ts": "1.2", "text": "Zoë", "blocks": blocks,
                              "metadata": {"event_type": "signoff", "event_payload": {"amount": 2**70}}}]


async def test_the_answer_reads_as_json_reads_it(api: tuple[Api, AsyncWebClient]) -> None:
    fake, client = api
    fake.answer = '{"ok": true, "ts": "1.2", "big": 123456789012345678901234, "odd": NaN, "name": "Zo\\u00eb"}'
    answer = await client.chat_update(channel="C1", ts="1.2", text="x")
    assert answer["big"] == 123456789012345678901234 and isinstance(answer["big"], int)
    assert math.isnan(answer["odd"]) and answer["name"] == "Zoë" and answer["ts"] == "1.2"


async def test_a_broken_answer_is_still_slack_sdks_error(api: tuple[Api, AsyncWebClient]) -> None:
    fake, client = api
    fake.answer = '{"ok": tru'
    with pytest.raises(SlackApiError, match="Received a response in a non-JSON format"):
        await client.chat_update(channel="C1", ts="1.2", text="x")
