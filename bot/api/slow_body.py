"""A request's body must arrive within a deadline once its headers are in (SIGNOFF_BODY_TIMEOUT_SECONDS).

The header timeout (bot.process.serve.app_runner) closes a connection whose headers stall; aiohttp has no
limit of its own on a body that trickles in after complete headers, so a client could hold a handler
(and its token's share of costly checks) for as long as it kept sending a byte now and then.

The deadline runs from when the handler chain starts until the body's last byte has arrived. When it
passes with the body still incomplete, the body's stream is failed: whatever is reading it (the API,
Bolt's adapter, /mcp) stops at once, the answer is a 408 `body_timeout` and the connection is closed.
A body that has fully arrived (almost every request: a small body comes with its headers) costs
nothing: no timer is set for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class BodyTimeout(Exception):
    """The body did not arrive in time (raised by the body's stream into whoever reads it)."""


def body_deadline(seconds: float) -> Middleware:
    @web.middleware
    async def deadline(request: web.Request, handler: Handler) -> web.StreamResponse:
        body = request.content
        if not request.body_exists or body.is_eof():
            return await handler(request)
        timeout = BodyTimeout()

        def expire() -> None:
            if not body.is_eof():
                body.set_exception(timeout)

        timer = asyncio.get_running_loop().call_later(seconds, expire)
        try:
            return await handler(request)
        except BodyTimeout as exc:
            if exc is not timeout:
                raise
            message = f"the request's body did not arrive within {seconds:g} s of its headers"
            response = web.json_response({"error": {"code": "body_timeout", "message": message}}, status=408)
            response.force_close()
            return response
        finally:
            timer.cancel()

    return deadline
