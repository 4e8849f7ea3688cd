"""Socket Mode's requests stored before their ack, as the HTTP ones are (bot/slack/received.py).

Bolt's handler acks an envelope once the listener calls ack(); the listener itself runs on in Bolt's
task, and nothing said when it ended. This handler gives clicks, form answers, commands and events to
`intake` (bot/process/slack_endpoint.py's `socket_intake`): stored, then run to their end by the same
listeners as HTTP's, the row marked done afterwards. Anything else goes Bolt's own way.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.adapter.socket_mode.async_internals import send_async_response
from slack_bolt.adapter.socket_mode.internals import build_headers
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest

from bot.domain.json_codec import dumps

Intake = Callable[[AsyncBoltRequest, str], Awaitable[BoltResponse | None]]


class DurableSocketMode(AsyncSocketModeHandler):
    intake: Intake | None = None

    async def handle(self, client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        start = time.time()
        if self.intake is not None and isinstance(req.payload, dict):
            request = AsyncBoltRequest(mode="socket_mode", body=req.payload, headers=build_headers(req))
            response = await self.intake(request, dumps(req.payload))
            if response is not None:
                await send_async_response(client, req, response, start)
                return
        await super().handle(client, req)
