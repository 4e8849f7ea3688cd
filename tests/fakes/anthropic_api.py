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
import re
import secrets
import string
import traceback
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

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

#: Top-level request fields the Messages API accepts. Anything else is a 400
#: ("Extra inputs are not permitted"), which catches typos such as ``max_token``.
_KNOWN_BODY_FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "system",
        "tools",
        "tool_choice",
        "metadata",
        "stop_sequences",
        "stream",
        "temperature",
        "top_p",
        "top_k",
        "thinking",
        "service_tier",
        "container",
        "mcp_servers",
        "cache_control",
        "context_management",
        "output_config",
        "output_format",
        "inference_geo",
        "speed",
        "diagnostics",
    }
)

#: Content block types valid only in (or in both) roles.
_USER_BLOCK_TYPES = frozenset({"text", "image", "document", "tool_result", "search_result"})
_ASSISTANT_BLOCK_TYPES = frozenset(
    {"text", "tool_use", "thinking", "redacted_thinking", "server_tool_use", "mcp_tool_use"}
)

_TOOL_USE_ID_RE = re.compile(r"^[a-zA-Z0-9_-]+$")
_TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_TOOL_CHOICE_TYPES = frozenset({"auto", "any", "tool", "none"})


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


# --------------------------------------------------------------------------- validation


class _Rejected(Exception):
    """Raised by validation helpers; becomes an error response."""

    def __init__(self, status: int, type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message


def _invalid(message: str) -> _Rejected:
    return _Rejected(400, "invalid_request_error", message)


def _validate_text_block(block: dict[str, Any], where: str) -> None:
    if not isinstance(block.get("text"), str):
        raise _invalid(f"{where}.text: Input should be a valid string")
    if block["text"] == "":
        raise _invalid(f"{where}: text content blocks must be non-empty")


def _validate_tool_result(block: dict[str, Any], where: str) -> None:
    if not isinstance(block.get("tool_use_id"), str):
        raise _invalid(f"{where}.tool_use_id: Field required")
    if "is_error" in block and not isinstance(block["is_error"], bool):
        raise _invalid(f"{where}.is_error: Input should be a valid boolean")
    content = block.get("content")
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _invalid(f"{where}.content: Input should be a valid string or list of content blocks")
    for j, inner in enumerate(content):
        inner_where = f"{where}.content.{j}"
        if not isinstance(inner, dict) or inner.get("type") not in {"text", "image", "document", "search_result"}:
            raise _invalid(
                f"{inner_where}: Input tag {inner.get('type') if isinstance(inner, dict) else inner!r} found "
                "using 'type' does not match any of the expected tags: 'text', 'image', 'document', 'search_result'"
            )
        if inner["type"] == "text":
            _validate_text_block(inner, inner_where)


def _validate_block(block: Any, role: str, where: str) -> None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise _invalid(f"{where}: Input should be a valid content block object with a 'type'")
    kind = block["type"]
    allowed = _USER_BLOCK_TYPES if role == "user" else _ASSISTANT_BLOCK_TYPES
    if kind not in allowed and not (role == "assistant" and kind.endswith("_tool_result")):
        raise _invalid(
            f"{where}: Input tag '{kind}' found using 'type' does not match any of the expected "
            f"tags for a{'n' if role == 'assistant' else ''} {role} message: "
            + ", ".join(f"'{t}'" for t in sorted(allowed))
        )
    if kind == "text":
        _validate_text_block(block, where)
    elif kind == "tool_use":
        if not isinstance(block.get("id"), str) or not _TOOL_USE_ID_RE.match(block["id"]):
            raise _invalid(f"{where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'")
        if not isinstance(block.get("name"), str) or not block["name"]:
            raise _invalid(f"{where}.name: Field required")
        if not isinstance(block.get("input"), dict):
            raise _invalid(f"{where}.input: Input should be a valid dictionary")
    elif kind == "tool_result":
        _validate_tool_result(block, where)


def _validate_tools(body: dict[str, Any]) -> set[str]:
    """Validate ``tools`` / ``tool_choice`` and return the declared tool names."""
    names: set[str] = set()
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise _invalid("tools: Input should be a valid list")
        for i, tool in enumerate(tools):
            where = f"tools.{i}"
            if not isinstance(tool, dict):
                raise _invalid(f"{where}: Input should be a valid dictionary")
            name = tool.get("name")
            if not isinstance(name, str) or not _TOOL_NAME_RE.match(name):
                raise _invalid(f"{where}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'")
            if name in names:
                raise _invalid("tools: Tool names must be unique.")
            names.add(name)
            if tool.get("type", "custom") != "custom":
                continue  # a server tool (web_search_..., bash_..., ...); shape not checked
            if "description" in tool and not isinstance(tool["description"], str):
                raise _invalid(f"{where}.custom.description: Input should be a valid string")
            schema = tool.get("input_schema")
            if not isinstance(schema, dict):
                raise _invalid(f"{where}.custom.input_schema: Field required")
            if schema.get("type") != "object":
                raise _invalid(f"{where}.custom.input_schema.type: Input should be 'object'")
    choice = body.get("tool_choice")
    if choice is not None:
        if not isinstance(choice, dict) or choice.get("type") not in _TOOL_CHOICE_TYPES:
            raise _invalid(
                "tool_choice: Input tag does not match any of the expected tags: 'auto', 'any', 'tool', 'none'"
            )
        if choice["type"] != "none" and tools is None:
            raise _invalid("tool_choice may only be specified while providing tools.")
        if choice["type"] == "tool" and choice.get("name") not in names:
            raise _invalid(f"Tool '{choice.get('name')}' not found in provided tools")
    return names


def _validate_body(body: dict[str, Any]) -> None:
    """Raise :class:`_Rejected` for anything the real Messages API would reject."""
    extra = sorted(set(body) - _KNOWN_BODY_FIELDS)
    if extra:
        raise _invalid(f"{extra[0]}: Extra inputs are not permitted")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _invalid("model: Field required")
    max_tokens = body.get("max_tokens")
    if "max_tokens" not in body:
        raise _invalid("max_tokens: Field required")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        raise _invalid("max_tokens: Input should be a valid integer")
    if max_tokens < 1:
        raise _invalid("max_tokens: Input should be greater than or equal to 1")
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        if not isinstance(system, list):
            raise _invalid("system: Input should be a valid string or list of text blocks")
        for i, block in enumerate(system):
            if not isinstance(block, dict) or block.get("type") != "text":
                raise _invalid(f"system.{i}: Input tag does not match the expected tag: 'text'")
            _validate_text_block(block, f"system.{i}")
    if body.get("stream"):
        raise _Rejected(500, "api_error", "FakeAnthropic: streaming (stream=true) is not supported by this fake")
    tools_declared = "tools" in body and body["tools"] is not None
    _validate_tools(body)

    messages = body.get("messages")
    if "messages" not in body:
        raise _invalid("messages: Field required")
    if not isinstance(messages, list):
        raise _invalid("messages: Input should be a valid list")
    if not messages:
        raise _invalid("messages: at least one message is required")

    uses_tools = False
    for i, msg in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(msg, dict):
            raise _invalid(f"{where}: Input should be a valid dictionary")
        role = msg.get("role")
        if role not in ("user", "assistant"):
            raise _invalid(f"{where}.role: Input should be 'user' or 'assistant'")
        expected = "user" if i % 2 == 0 else "assistant"
        if role != expected:
            if i == 0:
                raise _invalid("messages: first message must use the \"user\" role")
            raise _invalid("messages: roles must alternate between \"user\" and \"assistant\", but found multiple "
                           f"\"{role}\" roles in a row")
        if "content" not in msg:
            raise _invalid(f"{where}.content: Field required")
        extra_keys = sorted(set(msg) - {"role", "content"})
        if extra_keys:
            raise _invalid(f"{where}.{extra_keys[0]}: Extra inputs are not permitted")
        content = msg["content"]
        is_final_assistant = role == "assistant" and i == len(messages) - 1
        if isinstance(content, str):
            if not content and not is_final_assistant:
                raise _invalid(f"{where}: all messages must have non-empty content except for the optional "
                               "final assistant message")
            if is_final_assistant and content != content.rstrip():
                raise _invalid("final assistant content cannot end with trailing whitespace")
            continue
        if not isinstance(content, list):
            raise _invalid(f"{where}.content: Input should be a valid string or list of content blocks")
        if not content and not is_final_assistant:
            raise _invalid(f"{where}: all messages must have non-empty content except for the optional "
                           "final assistant message")
        for j, block in enumerate(content):
            _validate_block(block, role, f"{where}.content.{j}")
            if block["type"] in ("tool_use", "tool_result"):
                uses_tools = True
        if is_final_assistant and content and content[-1]["type"] == "text":
            if content[-1]["text"] != content[-1]["text"].rstrip():
                raise _invalid("final assistant content cannot end with trailing whitespace")

    if uses_tools and not tools_declared:
        raise _invalid("Requests which include `tool_use` or `tool_result` blocks must define tools.")
    _validate_tool_pairing(messages)


def _validate_tool_pairing(messages: list[dict[str, Any]]) -> None:
    """Enforce: every assistant ``tool_use`` is answered by a leading ``tool_result`` in the next message."""
    for i, msg in enumerate(messages):
        content = msg["content"]
        blocks = content if isinstance(content, list) else []
        if msg["role"] == "assistant":
            ids = [b["id"] for b in blocks if b["type"] == "tool_use"]
            if len(ids) != len(set(ids)):
                raise _invalid(f"messages.{i}.content: `tool_use` ids must be unique")
            if not ids:
                continue
            following = messages[i + 1]["content"] if i + 1 < len(messages) else []
            following_blocks = following if isinstance(following, list) else []
            leading: list[str] = []
            for block in following_blocks:
                if block["type"] != "tool_result":
                    break
                leading.append(block["tool_use_id"])
            missing = [tid for tid in ids if tid not in leading]
            if missing:
                raise _invalid(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block "
                    "in the next message."
                )
        else:
            results = [(j, b["tool_use_id"]) for j, b in enumerate(blocks) if b["type"] == "tool_result"]
            if not results:
                continue
            previous = messages[i - 1]["content"] if i > 0 else []
            known = {b["id"] for b in previous if b["type"] == "tool_use"} if isinstance(previous, list) else set()
            seen: set[str] = set()
            for j, tid in results:
                if tid not in known:
                    raise _invalid(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {tid}. "
                        "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                    )
                if tid in seen:
                    raise _invalid(f"messages.{i}.content.{j}: each `tool_use` id must have exactly one "
                                   f"`tool_result` block; found duplicates for {tid}")
                seen.add(tid)
            # tool_result blocks must all precede any other content
            first_other = next((j for j, b in enumerate(blocks) if b["type"] != "tool_result"), len(blocks))
            if any(j > first_other for j, _ in results):
                raise _invalid(
                    f"messages.{i}: `tool_result` blocks must come before any other content in the message"
                )


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
            _validate_body(body)
        except _Rejected as exc:
            return self._reject(exc.status, exc.type, exc.message)

        try:
            reply = await self._next_reply(body, index)
        except _Rejected as exc:
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
                raise _Rejected(500, "api_error", f"FakeAnthropic: on_request returned {result!r}, not a Reply")
            return result
        raise _Rejected(500, "api_error", f"FakeAnthropic: no scripted reply for request #{index}")
