"""A local, streaming fake of the Messages API for the real Claude Code CLI (and the Agent SDK).

The CLI always streams, sends fields and message shapes the strict `bot.sandbox.model`'s fake
rejects on purpose (a `role: "system"` entry inside `messages`, newer body fields), and makes side
requests of its own (no tools: titles, summaries). So this fake is lenient and streaming:

- `POST /v1/messages` with `stream: true` is answered with server-sent events in the API's order
  (`message_start`; per block `content_block_start` / `content_block_delta` (`text_delta` or
  `input_json_delta`) / `content_block_stop`; `message_delta` with `stop_reason`; `message_stop`);
  without `stream` with the plain JSON message.
- Requests that declare tools are the agent's turns: each takes the next scripted `Reply` (built with
  `bot.sandbox.model.message`/`text`/`tool_use`), or `on_request(body)`'s. Requests without tools get a
  short text and consume nothing. Every request is recorded (`requests`: the agent's turns only).
- No scripted reply left: a text reply saying so (`unscripted` counts them), so a CLI run ends
  instead of retrying, and the test sees the count.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections import deque
from collections.abc import Callable
from typing import Any

from aiohttp import web

from bot.sandbox.model import Reply, message, text

Factory = Callable[[dict[str, Any]], Reply | None]


class FakeClaudeApi:
    def __init__(self) -> None:
        self.url = ""
        self.requests: list[dict[str, Any]] = []  # the agent's turns (requests that declare tools)
        self.side_requests: list[dict[str, Any]] = []
        self.unscripted = 0
        self._queue: deque[Reply] = deque()
        self._factory: Factory | None = None
        self._cond = asyncio.Condition()
        self._runner: web.AppRunner | None = None

    async def start(self) -> FakeClaudeApi:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_route("*", "/{tail:.*}", self._other)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def script(self, *replies: Reply) -> None:
        self._queue.extend(replies)

    def on_request(self, factory: Factory | None) -> None:
        """Compute a reply from the request body when the script is empty (None: nothing to say)."""
        self._factory = factory

    def reset(self) -> None:
        self.requests.clear()
        self.side_requests.clear()
        self._queue.clear()
        self._factory = None
        self.unscripted = 0

    async def wait_for_requests(self, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        async with self._cond:
            await asyncio.wait_for(self._cond.wait_for(lambda: len(self.requests) >= count), timeout)
        return self.requests[:count]

    def tool_results(self, index: int = -1) -> list[dict[str, Any]]:
        """The tool_result blocks of the last user message of the agent's turn `index`."""
        messages = self.requests[index]["messages"]
        for msg in reversed(messages):
            if msg.get("role") == "user" and isinstance(msg.get("content"), list):
                results = [b for b in msg["content"] if b.get("type") == "tool_result"]
                if results:
                    return results
        return []

    async def _other(self, request: web.Request) -> web.Response:
        return web.json_response({"type": "error", "error": {"type": "not_found_error",
                                                             "message": f"no route {request.path}"}}, status=404)

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = json.loads(await request.read())
        if body.get("tools"):
            async with self._cond:
                self.requests.append(body)
                self._cond.notify_all()
            reply = self._next(body)
        else:
            self.side_requests.append(body)
            reply = message(text("OK"))
        if reply.status != 200:
            return web.json_response(reply.body, status=reply.status, headers=dict(reply.headers))
        payload = copy.deepcopy(reply.body)
        payload["usage"] = {"input_tokens": 10, "output_tokens": 10}
        if not body.get("stream"):
            return web.json_response(payload)
        return await self._stream(request, payload)

    def _next(self, body: dict[str, Any]) -> Reply:
        if self._queue:
            return self._queue.popleft()
        if self._factory is not None:
            made = self._factory(copy.deepcopy(body))
            if made is not None:
                return made
        self.unscripted += 1
        return message(text("(the fake model has nothing more scripted)"))

    async def _stream(self, request: web.Request, payload: dict[str, Any]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                               "request-id": "req_fake"})
        await response.prepare(request)

        async def send(event: str, data: dict[str, Any]) -> None:
            await response.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())

        start = {**payload, "content": [], "stop_reason": None, "stop_sequence": None,
                 "usage": {"input_tokens": 10, "output_tokens": 1}}
        await send("message_start", {"type": "message_start", "message": start})
        for index, block in enumerate(payload["content"]):
            if block["type"] == "tool_use":
                opening = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            else:
                opening = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            await send("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": opening})
            await send("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            await send("content_block_stop", {"type": "content_block_stop", "index": index})
        await send("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": payload["stop_reason"], "stop_sequence": None},
                                     "usage": {"output_tokens": 10}})
        await send("message_stop", {"type": "message_stop"})
        await response.write_eof()
        return response
