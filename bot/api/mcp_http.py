"""Signoff's MCP tools over streamable HTTP at `/mcp` on the main aiohttp server (bearer auth).

The tools are `signoff.mcp_server`'s (the same as `signoff mcp` over stdio). The MCP SDK serves
streamable HTTP as an ASGI app; `asgi_handler` runs that app for one aiohttp request: the body read
once (bounded by the server's body limit), the response streamed through as the app sends it (a
POST's answer is an SSE stream that ends with the tool's result).

Invariants:
- Stateless (no MCP session kept between requests), so any replica behind a load balancer can
  answer any request; the session manager's task group runs for the life of the web app and is
  stopped first on shutdown, so an MCP call waiting for a person never holds up a graceful stop.
- Every request carries a bearer token from SIGNOFF_API_TOKENS, checked before the MCP app sees it.
- A tool call reaches the agent API of the very process that received it (its own socket, with the
  caller's token): one code path for validation, idempotency and long-polls, whichever way an agent came.
- The MCP SDK is imported off the event loop when the first /mcp request comes, not at start: about
  0.4 s of CPU that a process whose agents never use MCP (and every replica a platform starts and
  stops) does not pay. That first request, and any beside it, waits for the import (under a second).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from bot.api.tokens import bearer, matching
from bot.process.settings import Settings
from signoff.client import AsyncSignoffClient

if TYPE_CHECKING:
    from signoff.mcp_server import Defaults

Asgi = Callable[[MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
                Awaitable[None]]
MCP_PATH = "/mcp"
log = logging.getLogger("signoff")


def _token(request: Any) -> str | None:
    scheme, _, given = (request.headers.get("Authorization") or "").partition(" ")
    return given.strip() if scheme.lower() == "bearer" and given.strip() else None


def _defaults(settings: Settings) -> Callable[[Any], Defaults]:
    """Where a call's card goes: `/mcp?channel=C...&approvers=U1,S2`, else the server's default channel.

    An MCP host cannot pass environment to a remote server; its configured URL can carry these. The
    URL's `risk`, `approvers` and `channel` are the operator's: the model's arguments may raise the
    risk, never lower it, and cannot replace the approvers or the channel (`signoff.mcp_server.bar`).
    """
    def for_call(ctx: Any) -> Defaults:
        from signoff.mcp_server import Defaults  # imported by then (`_import_sdk`)

        query = ctx.request_context.request.query_params
        approvers = tuple(a.strip() for a in query.get("approvers", "").split(",") if a.strip())
        # The URL's channel is the operator's and holds; without one the model's, else the API's
        # SIGNOFF_DEFAULT_CHANNEL (applied when the loopback submit names none).
        return Defaults(channel=query.get("channel") or None, approvers=approvers,
                        risk=query.get("risk") or None, requested_by="MCP client over HTTP")

    return for_call


def _loopback_client(ctx: Any) -> AsyncSignoffClient:
    """A client for this process's own agent API, as the caller (its bearer token)."""
    request = ctx.request_context.request
    host, port = request.scope["server"]
    host = f"[{host}]" if ":" in host else host
    return AsyncSignoffClient(f"http://{host}:{port}", _token(request), retry_for=5.0)


def _authorized(request: web.Request, tokens: tuple[str, ...] | list[str]) -> bool:
    return bool(matching(bearer(request.headers.get("Authorization")), tokens))


async def asgi_handler(app: Asgi, request: web.Request) -> web.StreamResponse:
    """Run ASGI `app` for one aiohttp request, streaming its response."""
    body = await request.read()
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    peer = request.transport.get_extra_info("peername") if request.transport else None
    scope: dict[str, Any] = {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
        "method": request.method, "scheme": request.scheme, "path": request.path,
        "raw_path": request.raw_path.split("?", 1)[0].encode(), "query_string": request.query_string.encode(),
        "root_path": "", "headers": [(k.lower().encode("utf-8", "surrogateescape"), v.encode("utf-8", "surrogateescape"))
                                     for k, v in request.headers.items()],
        "server": (sockname[0], sockname[1]) if sockname else None,
        "client": (peer[0], peer[1]) if peer else None,
    }
    done = asyncio.Event()
    body_sent = False
    response: web.StreamResponse | None = None

    async def receive() -> dict[str, Any]:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()  # nothing more to read: the next event is the end of the exchange
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        nonlocal response
        if message["type"] == "http.response.start":
            response = web.StreamResponse(status=message["status"])
            for name, value in message.get("headers", []):
                if name.lower() not in (b"content-length", b"transfer-encoding", b"connection"):
                    response.headers.add(name.decode("latin-1"), value.decode("latin-1"))
            await response.prepare(request)
        elif message["type"] == "http.response.body" and response is not None and not done.is_set():
            try:
                if message.get("body"):
                    await response.write(message["body"])
                if not message.get("more_body"):
                    await response.write_eof()
            except ConnectionResetError:
                done.set()  # the client left (e.g. a listen stream when the CLI exits): the app reads a disconnect

    try:
        await app(scope, receive, send)
    finally:
        done.set()
    if response is None:
        raise web.HTTPInternalServerError(reason="the MCP app sent no response")
    return response


def _import_sdk() -> None:
    for name in ("mcp.server.transport_security", "signoff.mcp_server"):
        importlib.import_module(name)


def _build(settings: Settings) -> tuple[Any, Asgi]:
    """(MCP server, its ASGI app): the SDK must have been imported (`_import_sdk`)."""
    from mcp.server.transport_security import TransportSecuritySettings

    from signoff.mcp_server import build_server

    server = build_server(_loopback_client, _defaults(settings))
    # Bearer auth stands in for the SDK's DNS-rebinding check (a browser cannot add our token); the
    # check would also refuse the public Host header of a deployed server.
    asgi = server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True,
                                      transport_security=TransportSecuritySettings(
                                          enable_dns_rebinding_protection=False))
    return server, asgi


def add_mcp(web_app: web.Application, settings: Settings) -> None:
    """Serve the MCP tools at /mcp; their session manager runs while the web app does."""
    inflight: set[asyncio.Task[Any]] = set()
    stop = asyncio.Event()
    loading: asyncio.Task[Asgi] | None = None
    manager: asyncio.Task[None] | None = None
    serving = False  # between the web app's start and its shutdown

    def loaded() -> asyncio.Task[Asgi]:
        nonlocal loading
        if loading is None:
            loading = asyncio.create_task(load(), name="mcp-load")
        return loading

    async def handler(request: web.Request) -> web.StreamResponse:
        if not _authorized(request, settings.api_tokens):
            return web.json_response(
                {"error": {"code": "unauthorized", "message": "missing or invalid bearer token (Authorization: Bearer ...)"}},
                status=401, headers={"WWW-Authenticate": 'Bearer realm="signoff"'})
        current = asyncio.current_task()
        if current is not None:
            inflight.add(current)
        try:
            if not serving:
                raise web.HTTPServiceUnavailable(reason="the MCP endpoint is not serving (starting or stopping)")
            asgi = await asyncio.shield(loaded())
            return await asgi_handler(asgi, request)
        finally:
            if current is not None:
                inflight.discard(current)

    async def load() -> Asgi:
        try:
            return await _load()
        except Exception:
            log.exception("the MCP endpoint could not start: every /mcp request is answered 500")
            raise

    async def _load() -> Asgi:
        nonlocal manager
        await asyncio.to_thread(_import_sdk)
        server, asgi = _build(settings)
        started = asyncio.Event()

        async def run() -> None:
            # The manager's task group must be entered and left in one task: it gets its own.
            async with server.session_manager.run():
                started.set()
                await stop.wait()

        manager = asyncio.create_task(run(), name="mcp-session-manager")
        waiting = asyncio.create_task(started.wait())
        await asyncio.wait([manager, waiting], return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if manager.done():
            manager.result()  # raise what stopped it
        return asgi

    async def start(_app: web.Application) -> None:
        nonlocal serving
        serving = True

    async def shut_down(_app: web.Application) -> None:
        nonlocal serving
        serving = False
        # Before aiohttp waits for open requests: MCP calls can wait for a person (or hold a listen
        # stream) far longer than a graceful stop should take. Their clients see the call fail. (The
        # 2026 protocol's requests run in their HTTP handler's task, the older ones in the manager's.)
        for running in list(inflight):
            running.cancel()
        stop.set()
        if loading is not None:  # an import in its thread cannot be cut short; it takes under a second
            await asyncio.wait([loading])
            if not loading.cancelled():
                loading.exception()  # a failed load was logged when it failed: retrieved, not raised
        if manager is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await manager

    web_app.router.add_route("*", MCP_PATH, handler)
    web_app.on_startup.append(start)
    web_app.on_shutdown.append(shut_down)
    web_app.on_cleanup.append(shut_down)  # a runner that never started the site still stops it
