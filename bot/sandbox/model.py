"""A scripted, local fake of Anthropic's ``POST /v1/messages`` endpoint.

The fake is an aiohttp server bound to ``127.0.0.1`` on an ephemeral port. Point
the *real* SDK at it with ``anthropic.AsyncAnthropic(base_url=fake.url,
api_key="test")`` (or set ``ANTHROPIC_BASE_URL=fake.url``).

Replies are scripted up front (:meth:`FakeAnthropic.script`) or computed per
request (:meth:`FakeAnthropic.on_request`). Before a reply is chosen, every
request is validated the way the real API validates it (headers, body shape,
role alternation, the ``tool_use`` -> ``tool_result`` pairing rule, tool
definitions), so a bug in our agent runner produces the same 4xx it would in
production instead of silently "working" against a lenient fake. A request that
is rejected does *not* consume a scripted reply.

Errors that mean the *test script* is wrong (no reply queued, a scripted
``tool_use`` naming an undeclared tool, a crashing ``on_request`` callback) are
answered with ``500 api_error`` plus ``x-should-retry: false`` so the SDK fails
immediately instead of retrying with back-off.

Example::

    fake = FakeAnthropic()
    await fake.start()
    fake.script(
        message(tool_use("request_approval", {"action": "deploy"})),
        message(text("done")),
    )
    client = anthropic.AsyncAnthropic(base_url=fake.url, api_key="test")
    ...
    await client.close()
    await fake.stop()
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import secrets
import string
import traceback
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from bot.sandbox.messages_check import Rejected, validate_body

__all__ = [
    "FakeAnthropic",
    "Reply",
    "ReplyFactory",
    "error",
    "message",
    "text",
    "tool_use",
]

_ALPHABET = string.ascii_letters + string.digits


def _random_id(prefix: str) -> str:
    """Return an id shaped like Anthropic's (``msg_``/``toolu_``/``req_`` + base62)."""
    return prefix + "".join(secrets.choice(_ALPHABET) for _ in range(24))


# --------------------------------------------------------------------------- replies


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP answer: status, JSON body and extra response headers."""

    status: int
    body: dict[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_message(self) -> bool:
        """True for a successful ``message`` reply (as opposed to an error)."""
        return self.status == 200 and self.body.get("type") == "message"


#: Signature of an :meth:`FakeAnthropic.on_request` callback.
ReplyFactory = Callable[[dict[str, Any]], "Reply | Awaitable[Reply]"]


def text(s: str) -> dict[str, Any]:
    """Build an assistant ``text`` content block."""
    return {"type": "text", "text": s}


def tool_use(name: str, input: dict[str, Any], id: str | None = None) -> dict[str, Any]:
    """Build an assistant ``tool_use`` content block (id ``toolu_...`` generated if omitted)."""
    return {
        "type": "tool_use",
        "id": id if id is not None else _random_id("toolu_"),
        "name": name,
        "input": copy.deepcopy(input),
    }


def message(*content: dict[str, Any], stop_reason: str | None = None, model: str = "claude-test") -> Reply:
    """Build a successful Messages API reply.

    ``stop_reason`` defaults to ``"tool_use"`` when any block is a ``tool_use``,
    else ``"end_turn"``. ``usage`` is filled in when the reply is served.
    """
    blocks = [copy.deepcopy(block) for block in content]
    for block in blocks:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise TypeError(f"message() content must be content-block dicts, got {block!r}")
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    body: dict[str, Any] = {
        "id": _random_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    return Reply(200, body)


def error(
    status: int,
    type: str,
    message: str,
    *,
    retry_after: int | None = None,
    retry_after_ms: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """Build an API error reply: ``{"type": "error", "error": {"type", "message"}}``.

    ``retry_after`` sets the ``retry-after`` header (seconds) and
    ``retry_after_ms`` the ``retry-after-ms`` header. Note the SDK ignores a
    value of ``0`` (it only honours ``> 0``) and then falls back to its own
    exponential back-off (~0.5 s, 1 s, ...); use ``retry_after_ms=1`` for a
    fast retry in tests. ``headers`` adds arbitrary headers, e.g.
    ``{"x-should-retry": "false"}``.
    """
    extra: dict[str, str] = dict(headers or {})
    if retry_after is not None:
        extra["retry-after"] = str(retry_after)
    if retry_after_ms is not None:
        extra["retry-after-ms"] = str(retry_after_ms)
    return Reply(status, {"type": "error", "error": {"type": type, "message": message}}, extra)


def _estimate_tokens(value: Any) -> int:
    """A deterministic stand-in for token counting (~4 characters per token)."""
    return max(1, len(json.dumps(value, sort_keys=True)) // 4)


# --------------------------------------------------------------------------- server


class FakeAnthropic:
    """Local, scripted stand-in for the Anthropic Messages API.

    Attributes:
        url: ``http://127.0.0.1:PORT`` once started (use as ``base_url``).
        requests: every JSON body received on ``/v1/messages``, in order,
            including rejected ones (a body that is not JSON is recorded as
            ``{"_raw": "<text>"}``).
        request_headers: the headers of each entry in ``requests``.
        rejections: ``(status, message)`` for every response the fake itself
            generated because the request or the script was wrong (validation
            4xx, "no scripted reply", bad script). Scripted :func:`error`
            replies are *not* rejections. Tests can assert it is empty.
    """

    def __init__(self) -> None:
        self.url: str = ""
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.rejections: list[tuple[int, str]] = []
        self._queue: deque[Reply] = deque()
        self._factory: ReplyFactory | None = None
        self._cond = asyncio.Condition()
        self._released = asyncio.Event()
        self._released.set()
        self._runner: web.AppRunner | None = None

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Start serving on an ephemeral port on 127.0.0.1 and set :attr:`url`."""
        if self._runner is not None:
            raise RuntimeError("FakeAnthropic already started")
        app = web.Application()
        app.router.add_post("/v1/messages", self._handle_messages)
        app.router.add_route("*", "/{tail:.*}", self._handle_unknown)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runner = runner
        host, port = runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"

    async def stop(self) -> None:
        """Release any held requests and shut the server down."""
        self._released.set()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> FakeAnthropic:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- scripting -------------------------------------------------------------------

    def script(self, *replies: Reply) -> None:
        """Queue replies; each request (that passes validation) consumes one, FIFO."""
        for reply in replies:
            if not isinstance(reply, Reply):
                raise TypeError(f"script() takes Reply objects (from message()/error()), got {reply!r}")
        self._queue.extend(replies)

    def on_request(self, fn: ReplyFactory | None) -> None:
        """Compute replies from the request body when the script queue is empty (``None`` clears it).

        ``fn`` receives a deep copy of the request body and returns a
        :class:`Reply` or an awaitable of one.
        """
        self._factory = fn

    @property
    def pending_replies(self) -> int:
        """Number of scripted replies not yet consumed."""
        return len(self._queue)

    def hold(self) -> None:
        """Make requests arriving from now on wait (recorded, but unanswered) until :meth:`release`."""
        self._released.clear()

    def release(self) -> None:
        """Let held requests proceed."""
        self._released.set()

    async def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Wait until at least ``count`` requests were received; return the first ``count``.

        Raises ``AssertionError`` if they do not arrive within ``timeout`` seconds.
        """
        try:
            async with asyncio.timeout(timeout):
                async with self._cond:
                    await self._cond.wait_for(lambda: len(self.requests) >= count)
        except TimeoutError:
            raise AssertionError(
                f"FakeAnthropic: expected {count} request(s) within {timeout}s, got {len(self.requests)}"
            ) from None
        return self.requests[:count]

    # -- HTTP handlers -----------------------------------------------------------------

    def _respond(self, status: int, body: dict[str, Any], headers: Mapping[str, str] | None = None) -> web.Response:
        out = {"request-id": _random_id("req_")}
        out.update(headers or {})
        return web.json_response(body, status=status, headers=out)

    def _reject(self, status: int, type: str, message: str) -> web.Response:
        """Answer with an error generated by the fake itself and record it in :attr:`rejections`."""
        self.rejections.append((status, message))
        headers = {"x-should-retry": "false"} if status >= 500 else None
        return self._respond(status, {"type": "error", "error": {"type": type, "message": message}}, headers)

    async def _handle_unknown(self, request: web.Request) -> web.Response:
        return self._reject(404, "not_found_error", f"FakeAnthropic: no route for {request.method} {request.path}")

    async def _handle_messages(self, request: web.Request) -> web.Response:
        raw = await request.read()
        body: dict[str, Any] | None
        try:
            parsed = json.loads(raw)
            body = parsed if isinstance(parsed, dict) else None
        except ValueError:
            body = None
        async with self._cond:
            self.requests.append(body if body is not None else {"_raw": raw.decode("utf-8", "replace")})
            self.request_headers.append(dict(request.headers))
            index = len(self.requests)
            self._cond.notify_all()

        await self._released.wait()

        if not (request.headers.get("x-api-key") or request.headers.get("authorization")):
            return self._reject(401, "authentication_error", "x-api-key header is required")
        if not request.headers.get("anthropic-version"):
            return self._reject(401, "authentication_error", "anthropic-version: header is required")
        if body is None:
            return self._reject(400, "invalid_request_error", "There was an error parsing the body of your request")
        try:
            validate_body(body)
        except Rejected as exc:
            return self._reject(exc.status, exc.type, exc.message)

        try:
            reply = await self._next_reply(body, index)
        except Rejected as exc:
            return self._reject(exc.status, exc.type, exc.message)
        except Exception:  # a crashing on_request callback must fail the test loudly
            return self._reject(500, "api_error", f"FakeAnthropic: on_request raised:\n{traceback.format_exc()}")

        if not reply.is_message:
            return self._respond(reply.status, reply.body, reply.headers)

        declared = {t["name"] for t in body.get("tools") or []}
        for block in reply.body.get("content", []):
            if block.get("type") == "tool_use" and block.get("name") not in declared:
                return self._reject(
                    500,
                    "api_error",
                    f"FakeAnthropic: script error in reply to request #{index}: scripted tool_use names "
                    f"{block.get('name')!r} but the request declared tools {sorted(declared)}",
                )
        payload = copy.deepcopy(reply.body)
        payload["usage"] = {
            "input_tokens": _estimate_tokens([body.get("system"), body.get("tools"), body["messages"]]),
            "output_tokens": _estimate_tokens(payload["content"]),
        }
        return self._respond(200, payload, reply.headers)

    async def _next_reply(self, body: dict[str, Any], index: int) -> Reply:
        if self._queue:
            return self._queue.popleft()
        if self._factory is not None:
            result = self._factory(copy.deepcopy(body))
            if inspect.isawaitable(result):
                result = await result
            if not isinstance(result, Reply):
                raise Rejected(500, "api_error", f"FakeAnthropic: on_request returned {result!r}, not a Reply")
            return result
        raise Rejected(500, "api_error", f"FakeAnthropic: no scripted reply for request #{index}")
