"""Slack's side of Socket Mode, for the fake Web API: `apps.connections.open` hands out a
ws:// URL on loopback, and the test pushes envelopes through the socket and reads the app's acks."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from aiohttp import WSMsgType, web


class SocketModeServer:
    def __init__(self, app_token: str = "xapp-test") -> None:
        self.app_token = app_token
        self.connected = asyncio.Event()
        self.opened = 0
        self._socket: web.WebSocketResponse | None = None
        self._answers: dict[str, asyncio.Future[dict[str, Any]]] = {}

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._socket = ws
        self.opened += 1
        await ws.send_str(json.dumps({"type": "hello", "num_connections": 1,
                                      "connection_info": {"app_id": "A1"}, "debug_info": {"host": "fake"}}))
        self.connected.set()
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            future = self._answers.pop(str(data.get("envelope_id")), None)
            if future is not None and not future.done():
                future.set_result(data)
        if self._socket is ws:
            self._socket = None
            self.connected.clear()
        return ws

    async def send(self, type: str, payload: dict[str, Any], *, timeout: float = 5.0) -> dict[str, Any]:
        """Deliver one envelope (`events_api`, `interactive`, `slash_commands`); return the app's ack."""
        await asyncio.wait_for(self.connected.wait(), timeout)
        assert self._socket is not None
        envelope_id = str(uuid.uuid4())
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._answers[envelope_id] = future
        await self._socket.send_str(json.dumps({
            "envelope_id": envelope_id, "type": type, "payload": payload,
            "accepts_response_payload": type != "events_api", "retry_attempt": 0, "retry_reason": "",
        }))
        return await asyncio.wait_for(future, timeout)

    async def close(self) -> None:
        if self._socket is not None:
            await self._socket.close()
