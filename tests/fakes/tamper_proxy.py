"""A man in the middle on loopback: forwards HTTP to the real server and may rewrite its JSON answers.

`tamper(body) -> body` is applied to every JSON object answered to a request whose path starts with one
of `paths` (by default the agent API's approvals); everything else passes through unchanged. The
server never knows: it signed what it sent, the agent receives something else.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import web

Tamper = Callable[[dict[str, Any]], dict[str, Any]]


class TamperProxy:
    def __init__(self, upstream: str, paths: tuple[str, ...] = ("/api/v1/approvals",)) -> None:
        self.upstream = upstream.rstrip("/")
        self.paths = paths
        self.tamper: Tamper | None = None
        self.tampered = 0
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.url = ""

    async def start(self) -> TamperProxy:
        self._session = aiohttp.ClientSession()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with self._session.request(request.method, self.upstream + request.path_qs, headers=headers,
                                         data=await request.read()) as answer:
            raw = await answer.read()
            status = answer.status
        if self.tamper is not None and request.path.startswith(self.paths):
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            if isinstance(body, dict):
                raw = json.dumps(self.tamper(body)).encode()
                self.tampered += 1
        return web.Response(body=raw, status=status, content_type="application/json")

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()
