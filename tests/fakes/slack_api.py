"""An in-process fake of the Slack Web API, served over real HTTP by aiohttp.

Point the real ``slack_sdk.web.async_client.AsyncWebClient`` at it::

    fake = FakeSlack()
    await fake.start()
    client = AsyncWebClient(token="xoxb-test", base_url=fake.url)

How slack_sdk 3.48 transmits the methods implemented here (``web/async_client.py``):

* JSON body (``Content-Type: application/json;charset=utf-8``): chat.postMessage,
  chat.update, chat.postEphemeral, views.open/update/push/publish. Booleans stay JSON
  booleans; ``blocks`` may still be a JSON *string* if the caller passed one.
* GET with query string: chat.getPermalink, conversations.history/replies/info/members,
  users.info, usergroups.users.list, usergroups.list. Booleans become "1"/"0".
* POST with the arguments in the *query string* and an empty form body: auth.test,
  conversations.open (``users`` joined with commas).
* The token travels in ``Authorization: Bearer``; a ``token`` argument moves there too.

Everything runs on the caller's event loop; state is plain attributes, so tests can
read and arrange it directly. Errors are answered the way Slack answers them: HTTP 200
with ``{"ok": false, "error": ...}`` (plus ``response_metadata.messages`` for
validation errors), except injected HTTP faults.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import logging
import time
import warnings
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable
from zoneinfo import ZoneInfo

from aiohttp import web

from tests.fakes.slack_socket import SocketModeServer
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

__all__ = ["Call", "FakeSlack", "Message", "MessageVersion"]

log = logging.getLogger(__name__)

_JSON_FIELDS = ("blocks", "metadata", "view", "attachments")
_BOOL_FIELDS = frozenset(
    {
        "as_user", "include_all_metadata", "include_disabled", "include_locale",
        "include_num_members", "include_users", "inclusive", "link_names", "mrkdwn",
        "prevent_creation", "reply_broadcast", "return_im", "unfurl_links", "unfurl_media",
    }
)
_INT_FIELDS = frozenset({"limit"})
_MAX_MESSAGE_BLOCKS = 50
_MAX_TEXT = 40_000
_TS_BASE = 1_700_000_000
_PERMALINK_HOST = "https://fake-slack.test"


@dataclass
class Call:
    """One HTTP request received by the fake, recorded on arrival and completed on answer.

    ``status`` is 0 while the request is still pending (delayed or hung). A hung request
    keeps ``hung=True`` for good; until it is released ``ok`` is False (no answer
    reached the caller) and ``response`` holds the withheld answer if the effect was
    applied (``{}`` otherwise). Once released, ``status``/``ok``/``response`` describe
    the answer that was finally sent.
    """

    method: str
    args: dict[str, Any]
    http_method: str
    token: str | None
    status: int = 0
    ok: bool = False
    response: dict[str, Any] = field(default_factory=dict)
    at: float = 0.0
    hung: bool = False

    @property
    def error(self) -> str | None:
        """The Slack error code of the answer, if any."""
        err = self.response.get("error")
        return err if isinstance(err, str) else None


@dataclass
class MessageVersion:
    """A message's content before one chat.update."""

    text: str
    blocks: list[dict[str, Any]]
    metadata: dict[str, Any] | None
    attachments: list[dict[str, Any]] | None


@dataclass
class Message:
    """A message stored by the fake. ``thread_ts`` is None for top-level messages."""

    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    metadata: dict[str, Any] | None
    thread_ts: str | None
    user: str
    update_count: int = 0
    history: list[MessageVersion] = field(default_factory=list)
    attachments: list[dict[str, Any]] | None = None
    bot_id: str | None = None


@dataclass
class _Fault:
    kind: str  # "fail" | "error" | "hang"
    remaining: int
    status: int = 200
    retry_after: int | None = None
    error: str = ""
    apply: bool = False


@dataclass
class _Delay:
    seconds: float
    remaining: int | None


class _ApiError(Exception):
    def __init__(self, error: str, messages: list[str] | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.messages = messages or []


def _ts_key(ts: str) -> tuple[int, int]:
    sec, _, frac = str(ts).partition(".")
    return int(sec or 0), int((frac or "0")[:6].ljust(6, "0"))


def _encode_cursor(ts: str) -> str:
    return base64.b64encode(f"next_ts:{ts}".encode()).decode()


def _decode_cursor(cursor: str) -> str:
    try:
        raw = base64.b64decode(cursor.encode(), validate=True).decode()
    except ValueError:
        raise _ApiError("invalid_cursor") from None
    if not raw.startswith("next_ts:"):
        raise _ApiError("invalid_cursor")
    return raw[len("next_ts:"):]


def _validate_blocks(blocks: Any, *, limit: int) -> list[dict[str, Any]]:
    """Validate like Slack would, using slack_sdk's models; returns the blocks unchanged."""
    if not isinstance(blocks, list):
        raise _ApiError("invalid_blocks_format", ["[ERROR] blocks must be a JSON array"])
    if len(blocks) > limit:
        raise _ApiError("invalid_blocks", [f"[ERROR] no more than {limit} items allowed [json-pointer:/blocks]"])
    problems = []
    for index, raw in enumerate(blocks):
        reason = _block_problem(raw)
        if reason is not None:
            problems.append(f"[ERROR] {reason} [json-pointer:/blocks/{index}]")
    if problems:
        raise _ApiError("invalid_blocks", problems)
    return blocks


def _block_problem(raw: Any) -> str | None:
    if not isinstance(raw, dict):
        return "block must be an object"
    try:
        # Block models may warn (e.g. deprecated fields); a fake must not turn that into
        # an exception under pytest's filterwarnings=error. No await inside, so this is safe.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parsed = Block.parse(raw)
            if parsed is None:
                return f"unknown block type {raw.get('type')!r}"
            parsed.to_dict()
    except Exception as exc:  # noqa: BLE001 - any failure is a validation failure
        return f"{type(exc).__name__}: {exc}"
    return None


def _validate_view(view: Any) -> dict[str, Any]:
    """Validate a view with slack_sdk's View model plus the checks Slack adds on top."""
    if not isinstance(view, dict):
        raise _ApiError("invalid_arguments", ["[ERROR] view must be a JSON object [json-pointer:/view]"])
    problems: list[str] = []
    blocks = view.get("blocks")
    if not isinstance(blocks, list) or not blocks:
        problems.append("[ERROR] view must contain between 1 and 100 blocks [json-pointer:/view/blocks]")
    else:
        for index, raw in enumerate(blocks):
            reason = _block_problem(raw)
            if reason is not None:
                problems.append(f"[ERROR] {reason} [json-pointer:/view/blocks/{index}]")
    if view.get("type") == "modal":
        if not view.get("title"):
            problems.append("[ERROR] modal views require a title [json-pointer:/view/title]")
        if isinstance(blocks, list) and any(isinstance(b, dict) and b.get("type") == "input" for b in blocks):
            if not view.get("submit"):
                problems.append("[ERROR] submit is required when a view has input blocks [json-pointer:/view/submit]")
    normalized: dict[str, Any] = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            normalized = View(**view).to_dict()
    except Exception as exc:  # noqa: BLE001
        problems.append(f"[ERROR] {type(exc).__name__}: {exc} [json-pointer:/view]")
    if problems:
        raise _ApiError("invalid_arguments", problems)
    return normalized


def _validate_metadata(metadata: Any) -> dict[str, Any] | None:
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise _ApiError("invalid_metadata_format")
    if not isinstance(metadata.get("event_type"), str) or not isinstance(metadata.get("event_payload", {}), dict):
        raise _ApiError("invalid_metadata_schema")
    return {"event_type": metadata["event_type"], "event_payload": metadata.get("event_payload", {})}


class FakeSlack:
    """A stateful fake of the Slack Web API served on 127.0.0.1 for one event loop.

    Arrange directory state with ``add_user``/``add_usergroup``/``add_channel``, inspect
    ``calls``, ``messages``, ``ephemerals``, ``views`` and ``home_views``, synchronise
    with ``wait_for`` and inject faults with ``fail``/``error``/``delay``/``hang``.
    Faults are queued per method and consumed first in, first out; delays are a
    separate queue, so a delay combines with a following fault.
    """

    def __init__(self, *, bot_token: str = "xoxb-test", bot_user_id: str = "UBOT", team_id: str = "T1") -> None:
        self.bot_token = bot_token
        self.bot_user_id = bot_user_id
        self.bot_id = "BBOT"
        self.app_id = "A1"
        self.team_id = team_id
        self.url = ""
        self.calls: list[Call] = []
        self.messages: dict[tuple[str, str], Message] = {}
        self.ephemerals: list[dict[str, Any]] = []
        self.views: dict[str, dict[str, Any]] = {}
        self.home_views: dict[str, dict[str, Any]] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self.usergroups: dict[str, dict[str, Any]] = {}
        self.channels: dict[str, dict[str, Any]] = {}
        self._faults: dict[str, deque[_Fault]] = {}
        self._delays: dict[str, deque[_Delay]] = {}
        self._ts_counter = 0
        self._view_counter = 0
        self._per_channel: dict[str, tuple[float, int]] = {}  # method -> (min interval s, Retry-After)
        self._last_in_channel: dict[tuple[str, str], float] = {}
        self._used_triggers: set[str] = set()
        self._changed = asyncio.Event()
        self._release = asyncio.Event()
        self._stopping = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.delete": self._chat_delete,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "chat.getPermalink": self._chat_get_permalink,
            "conversations.history": self._conversations_history,
            "conversations.replies": self._conversations_replies,
            "conversations.info": self._conversations_info,
            "conversations.open": self._conversations_open,
            "conversations.join": self._conversations_join,
            "conversations.members": self._conversations_members,
            "users.info": self._users_info,
            "usergroups.list": self._usergroups_list,
            "usergroups.users.list": self._usergroups_users_list,
            "views.open": self._views_open,
            "views.push": self._views_push,
            "views.update": self._views_update,
            "views.publish": self._views_publish,
        }
        self.add_user(bot_user_id, "signoff", "Signoff", is_bot=True)
        self.socket_mode = SocketModeServer()
        self._handlers["apps.connections.open"] = self._apps_connections_open

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Serve on 127.0.0.1 with an ephemeral port; sets ``url``."""
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._handle)
        app.router.add_get("/socket", self.socket_mode.handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}/api/"

    async def stop(self) -> None:
        """Release hung and delayed requests, then shut the server down."""
        self._stopping.set()
        self.release_hung()
        await self.socket_mode.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeSlack:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ calls

    def calls_to(self, method: str, *, ok_only: bool = False) -> list[Call]:
        """Calls to ``method`` in arrival order; with ``ok_only`` only those answered ok."""
        return [c for c in self.calls if c.method == method and (c.ok or not ok_only)]

    async def wait_for(
        self, method: str, count: int = 1, timeout: float = 5.0, *, ok_only: bool = True
    ) -> list[Call]:
        """Wait until at least ``count`` matching calls exist; return all matching calls.

        With ``ok_only=False`` a call counts as soon as it arrives (even if it is still
        delayed or hung). Raises AssertionError on timeout.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            matching = self.calls_to(method, ok_only=ok_only)
            if len(matching) >= count:
                return matching
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(self._timeout_message(method, count, len(matching), timeout, ok_only))
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                pass

    def reset_calls(self) -> None:
        """Forget recorded calls (state and faults are kept)."""
        self.calls.clear()
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _timeout_message(self, method: str, count: int, got: int, timeout: float, ok_only: bool) -> str:
        kind = "ok " if ok_only else ""
        seen = "\n".join(
            f"  {c.method} status={c.status} ok={c.ok}{' hung' if c.hung else ''}"
            + (f" error={c.error}" if c.error else "")
            for c in self.calls[-20:]
        )
        return (
            f"timed out after {timeout}s waiting for {count} {kind}call(s) to {method}; got {got}.\n"
            f"Last calls received ({len(self.calls)} total):\n{seen or '  (none)'}"
        )

    # ------------------------------------------------------------------ arrange

    def add_user(
        self, user_id: str, name: str, real_name: str | None = None, *, is_bot: bool = False, tz: str = "UTC"
    ) -> None:
        """Register a user for users.info (and as a DM target)."""
        real = real_name if real_name is not None else name
        offset = ZoneInfo(tz).utcoffset(dt.datetime(2024, 1, 1))
        self.users[user_id] = {
            "id": user_id,
            "team_id": self.team_id,
            "name": name,
            "real_name": real,
            "deleted": False,
            "tz": tz,
            "tz_offset": int(offset.total_seconds()) if offset is not None else 0,
            "is_bot": is_bot,
            "is_app_user": False,
            "profile": {"real_name": real, "display_name": name, "real_name_normalized": real},
        }

    def add_usergroup(self, group_id: str, user_ids: list[str], handle: str | None = None) -> None:
        """Register a user group (``S...``) with its members."""
        handle = handle or group_id.lower()
        self.usergroups[group_id] = {
            "id": group_id,
            "team_id": self.team_id,
            "handle": handle,
            "name": handle,
            "users": list(user_ids),
        }

    def add_channel(self, channel_id: str, name: str, members: list[str] | None = None, *,
                    bot_member: bool = True, private: bool = False) -> None:
        """Register a channel for conversations.info/members and name lookup.

        ``bot_member=False``: the bot can still post there (chat:write.public) but, as in Slack,
        conversations.history/replies answer ``not_in_channel`` until it joins (conversations.join,
        public channels only).
        """
        self.channels[channel_id] = {"id": channel_id, "name": name, "members": list(members or []),
                                     "bot_member": bot_member, "private": private}

    def add_message(self, channel: str, user: str, text: str, *, thread_ts: str | None = None) -> Message:
        """Store a message written by a human (it cannot be updated by the bot)."""
        msg = Message(channel, self._next_ts(), text, [], None, thread_ts, user)
        self.messages[(channel, msg.ts)] = msg
        return msg

    def channel_messages(self, channel: str, *, thread_ts: str | None = None) -> list[Message]:
        """Oldest first: top-level messages of ``channel``, or only the replies of ``thread_ts``."""
        found = [m for m in self.messages.values() if m.channel == channel and m.thread_ts == thread_ts]
        return sorted(found, key=lambda m: _ts_key(m.ts))

    # ------------------------------------------------------------------ faults

    def fail(self, method: str, *, status: int, times: int = 1, retry_after: int | None = None) -> None:
        """Answer the next ``times`` calls with HTTP ``status`` and no effect."""
        self._faults.setdefault(method, deque()).append(_Fault("fail", times, status=status, retry_after=retry_after))

    def error(self, method: str, error: str, *, times: int = 1) -> None:
        """Answer the next ``times`` calls with HTTP 200 ``{"ok": false, "error": error}`` and no effect."""
        self._faults.setdefault(method, deque()).append(_Fault("error", times, error=error))

    def delay(self, method: str, seconds: float, *, times: int | None = None) -> None:
        """Wait ``seconds`` before handling the next ``times`` calls (None: every call)."""
        self._delays.setdefault(method, deque()).append(_Delay(seconds, times))

    def hang(self, method: str, *, apply: bool = False, times: int = 1) -> None:
        """Never answer the next ``times`` calls until ``release_hung()``/``stop()``.

        ``apply=True`` performs the call's effect before withholding the answer.
        A released call is answered with its real answer if applied, else with
        ``{"ok": false, "error": "fake_released"}``.
        """
        self._faults.setdefault(method, deque()).append(_Fault("hang", times, apply=apply))

    def release_hung(self) -> None:
        """Let every currently hung request answer."""
        release, self._release = self._release, asyncio.Event()
        release.set()

    def rate_limit(self, method: str, *, per_channel_seconds: float, retry_after: int = 1) -> None:
        """Like Slack's per-channel limit: a call to `method` for a channel less than
        `per_channel_seconds` after the last accepted one there gets 429 with `Retry-After`."""
        self._per_channel[method] = (per_channel_seconds, retry_after)

    def clear_faults(self) -> None:
        """Drop all queued faults and delays."""
        self._faults.clear()
        self._delays.clear()

    def _take(self, queues: dict[str, deque[Any]], method: str) -> Any:
        queue = queues.get(method)
        if not queue:
            return None
        item = queue[0]
        if item.remaining is not None:
            item.remaining -= 1
            if item.remaining <= 0:
                queue.popleft()
        return item

    # ------------------------------------------------------------------ HTTP

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        try:
            args, token = await self._read_args(request)
        except ValueError:
            args, token = {"_unparsable_body": True}, None
        call = Call(method=method, args=args, http_method=request.method, token=token, at=time.monotonic())
        self.calls.append(call)
        self._notify()

        delay: _Delay | None = self._take(self._delays, method)
        if delay is not None and not self._stopping.is_set():
            try:
                await asyncio.wait_for(self._stopping.wait(), delay.seconds)
            except TimeoutError:
                pass

        fault: _Fault | None = self._take(self._faults, method)
        headers: dict[str, str] = {}
        status = 200
        limited = self._per_channel.get(method)
        if fault is None and limited is not None and isinstance(args.get("channel"), str):
            where, now = (method, args["channel"]), time.monotonic()
            if now - self._last_in_channel.get(where, -1e9) < limited[0]:
                fault = _Fault("fail", 1, status=429, retry_after=limited[1])
            else:
                self._last_in_channel[where] = now
        if fault is not None and fault.kind == "fail":
            status = fault.status
            body: dict[str, Any] = {"ok": False, "error": "ratelimited" if status == 429 else "internal_error"}
            if status == 429 and fault.retry_after is not None:
                headers["Retry-After"] = str(fault.retry_after)
        elif fault is not None and fault.kind == "error":
            body = {"ok": False, "error": fault.error}
        elif fault is not None and fault.kind == "hang":
            return await self._hang(call, args, token, fault.apply)
        else:
            body = self._dispatch(method, args, token)

        call.status, call.ok, call.response = status, bool(body.get("ok")), body
        self._notify()
        return web.json_response(body, status=status, headers=headers)

    async def _hang(self, call: Call, args: dict[str, Any], token: str | None, apply: bool) -> web.StreamResponse:
        body = self._dispatch(call.method, args, token) if apply else {"ok": False, "error": "fake_released"}
        call.hung = True
        call.response = body if apply else {}
        release = self._release
        self._notify()
        await release.wait()
        call.status, call.ok, call.response = 200, bool(body.get("ok")), body
        self._notify()
        return web.json_response(body)

    async def _read_args(self, request: web.Request) -> tuple[dict[str, Any], str | None]:
        args: dict[str, Any] = dict(request.query)
        if request.method == "POST" and request.can_read_body:
            if request.content_type == "application/json":
                payload = await request.json()
                if isinstance(payload, dict):
                    args.update(payload)
            else:
                form = await request.post()
                args.update({k: v for k, v in form.items() if isinstance(v, str)})
        token = args.pop("token", None)
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            token = auth[len("Bearer "):].strip()
        for key in _JSON_FIELDS:
            value = args.get(key)
            if isinstance(value, str):
                try:
                    args[key] = json.loads(value)
                except ValueError:
                    pass  # left as a string; the method's validation rejects it
        for key in _BOOL_FIELDS & args.keys():
            if isinstance(args[key], str):
                args[key] = args[key].lower() in ("1", "true")
        for key in _INT_FIELDS & args.keys():
            if isinstance(args[key], str) and args[key].isdigit():
                args[key] = int(args[key])
        return args, token

    def _dispatch(self, method: str, args: dict[str, Any], token: str | None) -> dict[str, Any]:
        handler = self._handlers.get(method)
        if handler is None:
            return {"ok": False, "error": "unknown_method"}
        if args.get("_unparsable_body"):
            return {"ok": False, "error": "invalid_json"}
        expected = self.socket_mode.app_token if method == "apps.connections.open" else self.bot_token
        if token != expected:
            return {"ok": False, "error": "invalid_auth"}
        try:
            return {"ok": True, **handler(args)}
        except _ApiError as exc:
            body: dict[str, Any] = {"ok": False, "error": exc.error}
            if exc.messages:
                body["response_metadata"] = {"messages": exc.messages}
            return body
        except Exception as exc:  # a bug in the fake: answer visibly instead of a bare 500
            log.exception("FakeSlack failed handling %s", method)
            return {"ok": False, "error": "fake_slack_bug", "detail": repr(exc)}

    # ------------------------------------------------------------------ helpers

    def _next_ts(self) -> str:
        # Like Slack: the wall-clock time of the post, in microseconds, unique and increasing.
        self._ts_counter = max(self._ts_counter + 1, int(time.time() * 1_000_000))
        return f"{self._ts_counter // 1_000_000}.{self._ts_counter % 1_000_000:06d}"

    def _resolve_channel(self, channel: Any) -> str:
        if not isinstance(channel, str) or not channel:
            raise _ApiError("channel_not_found")
        if channel[0] in "UW" and channel[1:].isalnum():
            return "D" + channel
        name = channel.lstrip("#")
        for info in self.channels.values():
            if info["name"] == name:
                return str(info["id"])
        return channel

    def _require(self, args: dict[str, Any], key: str, error: str = "invalid_arguments") -> str:
        value = args.get(key)
        if not isinstance(value, str) or not value:
            raise _ApiError(error, [f"[ERROR] missing required field: {key}"])
        return value

    def _message_json(self, msg: Message, *, include_metadata: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "message", "ts": msg.ts, "text": msg.text, "user": msg.user}
        if msg.bot_id:
            out.update(bot_id=msg.bot_id, app_id=self.app_id)
        if msg.blocks:
            out["blocks"] = msg.blocks
        if msg.attachments:
            out["attachments"] = msg.attachments
        if msg.update_count:
            out["edited"] = {"user": msg.user, "ts": msg.ts}
        if include_metadata and msg.metadata is not None:
            out["metadata"] = msg.metadata
        if msg.thread_ts is not None:
            out["thread_ts"] = msg.thread_ts
            parent = self.messages.get((msg.channel, msg.thread_ts))
            if parent is not None:
                out["parent_user_id"] = parent.user
        else:
            replies = self.channel_messages(msg.channel, thread_ts=msg.ts)
            if replies:
                out.update(
                    thread_ts=msg.ts,
                    reply_count=len(replies),
                    reply_users=sorted({r.user for r in replies}),
                    latest_reply=replies[-1].ts,
                )
        return out

    def _message_content(self, args: dict[str, Any], *, required: bool) -> dict[str, Any]:
        """Validate text/blocks/attachments/metadata; returns only the keys present."""
        content: dict[str, Any] = {}
        if "blocks" in args:
            content["blocks"] = _validate_blocks(args["blocks"], limit=_MAX_MESSAGE_BLOCKS)
        if "attachments" in args:
            if not isinstance(args["attachments"], list):
                raise _ApiError("invalid_attachments")
            content["attachments"] = args["attachments"]
        if "text" in args:
            text = args["text"]
            if not isinstance(text, str):
                raise _ApiError("invalid_arguments", ["[ERROR] text must be a string"])
            if len(text) > _MAX_TEXT:
                raise _ApiError("msg_too_long")
            content["text"] = text
        if "metadata" in args:
            content["metadata"] = _validate_metadata(args["metadata"])
        if required and not (content.get("text") or content.get("blocks") or content.get("attachments")):
            raise _ApiError("no_text")
        return content

    # ------------------------------------------------------------------ methods

    def _apps_connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"url": self.url.replace("http://", "ws://").replace("/api/", "/socket")}

    def _auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://fake-slack.test/",
            "team": "Fake Team",
            "user": self.users[self.bot_user_id]["name"],
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _chat_post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        if (self.channels.get(channel) or {}).get("private"):
            self._require_member(channel)  # chat:write.public covers public channels only
        content = self._message_content(args, required=True)
        thread_ts = args.get("thread_ts") or None
        if thread_ts is not None:
            parent = self.messages.get((channel, thread_ts))
            if parent is not None and parent.thread_ts is not None:
                thread_ts = parent.thread_ts  # replying to a reply lands in the same thread
        msg = Message(
            channel=channel,
            ts=self._next_ts(),
            text=content.get("text", ""),
            blocks=content.get("blocks", []),
            metadata=content.get("metadata"),
            thread_ts=thread_ts,
            user=self.bot_user_id,
            attachments=content.get("attachments"),
            bot_id=self.bot_id,
        )
        self.messages[(channel, msg.ts)] = msg
        return {"channel": channel, "ts": msg.ts, "message": self._message_json(msg, include_metadata=True)}

    def _chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        ts = self._require(args, "ts", "message_not_found")
        msg = self.messages.get((channel, ts))
        if msg is None:
            raise _ApiError("message_not_found")
        if msg.user != self.bot_user_id:
            raise _ApiError("cant_update_message")
        content = self._message_content(args, required=False)
        if not content:
            raise _ApiError("no_text")
        msg.history.append(MessageVersion(msg.text, msg.blocks, msg.metadata, msg.attachments))
        msg.text = content.get("text", msg.text)
        msg.blocks = content.get("blocks", msg.blocks)
        msg.attachments = content.get("attachments", msg.attachments)
        if "metadata" in content:
            msg.metadata = content["metadata"]
        msg.update_count += 1
        return {
            "channel": channel,
            "ts": ts,
            "text": msg.text,
            "message": self._message_json(msg, include_metadata=True),
        }

    def _chat_delete(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        ts = self._require(args, "ts", "message_not_found")
        msg = self.messages.get((channel, ts))
        if msg is None:
            raise _ApiError("message_not_found")
        if msg.user != self.bot_user_id:
            raise _ApiError("cant_delete_message")
        del self.messages[(channel, ts)]
        return {"channel": channel, "ts": ts}

    def _chat_post_ephemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        user = self._require(args, "user", "user_not_in_channel")
        content = self._message_content(args, required=True)
        ts = self._next_ts()
        self.ephemerals.append(
            {
                "channel": channel,
                "user": user,
                "text": content.get("text", ""),
                "blocks": content.get("blocks", []),
                "thread_ts": args.get("thread_ts"),
                "ts": ts,
            }
        )
        return {"message_ts": ts}

    def _chat_get_permalink(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        ts = self._require(args, "message_ts", "message_not_found")
        msg = self.messages.get((channel, ts))
        if msg is None:
            raise _ApiError("message_not_found")
        link = f"{_PERMALINK_HOST}/archives/{channel}/p{ts.replace('.', '')}"
        if msg.thread_ts is not None:
            link += f"?thread_ts={msg.thread_ts}&cid={channel}"
        return {"channel": channel, "permalink": link}

    def _page(
        self, messages: list[Message], args: dict[str, Any], *, default_limit: int, include_metadata: bool
    ) -> dict[str, Any]:
        limit = args.get("limit") or default_limit
        if not isinstance(limit, int) or limit < 1:
            raise _ApiError("invalid_limit")
        start = 0
        if args.get("cursor"):
            cursor_ts = _decode_cursor(str(args["cursor"]))
            starts = [i for i, m in enumerate(messages) if m.ts == cursor_ts]
            if not starts:
                raise _ApiError("invalid_cursor")
            start = starts[0]
        page = messages[start : start + limit]
        more = start + limit < len(messages)
        out: dict[str, Any] = {
            "messages": [self._message_json(m, include_metadata=include_metadata) for m in page],
            "has_more": more,
        }
        if more:
            out["response_metadata"] = {"next_cursor": _encode_cursor(messages[start + limit].ts)}
        return out

    def _in_window(self, msg: Message, args: dict[str, Any]) -> bool:
        inclusive = bool(args.get("inclusive"))
        key = _ts_key(msg.ts)
        if args.get("oldest"):
            oldest = _ts_key(str(args["oldest"]))
            if key < oldest or (key == oldest and not inclusive):
                return False
        if args.get("latest"):
            latest = _ts_key(str(args["latest"]))
            if key > latest or (key == latest and not inclusive):
                return False
        return True

    def _require_member(self, channel: str) -> None:
        info = self.channels.get(channel)
        if info is not None and not info.get("bot_member", True):
            raise _ApiError("not_in_channel")

    def _conversations_join(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        info = self.channels.get(channel)
        if info is None:
            raise _ApiError("channel_not_found")
        if info.get("private"):
            raise _ApiError("method_not_supported_for_channel_type")
        already = info.get("bot_member", True)
        info["bot_member"] = True
        answer: dict[str, Any] = {"channel": {"id": channel, "name": info["name"], "is_member": True}}
        if already:
            answer["warning"] = "already_in_channel"
        return answer

    def _conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        self._require_member(channel)
        found = [m for m in self.channel_messages(channel) if self._in_window(m, args)]
        found.reverse()  # newest first, like Slack
        return self._page(found, args, default_limit=100, include_metadata=bool(args.get("include_all_metadata")))

    def _conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        self._require_member(channel)
        ts = self._require(args, "ts", "thread_not_found")
        msg = self.messages.get((channel, ts))
        if msg is None:
            raise _ApiError("thread_not_found")
        parent_ts = msg.thread_ts or msg.ts
        parent = self.messages.get((channel, parent_ts))
        thread = ([parent] if parent is not None else []) + self.channel_messages(channel, thread_ts=parent_ts)
        found = [m for m in thread if self._in_window(m, args)]
        return self._page(found, args, default_limit=1000, include_metadata=bool(args.get("include_all_metadata")))

    def _conversations_info(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        info = self.channels.get(channel)
        name = info["name"] if info else channel.lower()
        is_im = channel.startswith("D")
        out: dict[str, Any] = {
            "id": channel,
            "name": name,
            "is_channel": channel.startswith("C"),
            "is_group": channel.startswith("G"),
            "is_im": is_im,
            "is_private": bool(info.get("private")) if info else not channel.startswith("C"),
            "is_member": bool(info.get("bot_member", True)) if info else True,
            "is_archived": False,
        }
        if is_im:
            out["user"] = channel[1:]
        return {"channel": out}

    def _conversations_open(self, args: dict[str, Any]) -> dict[str, Any]:
        if args.get("channel"):
            return {"channel": {"id": self._resolve_channel(args["channel"])}}
        users = [u for u in str(args.get("users") or "").split(",") if u]
        if not users:
            raise _ApiError("users_list_not_supplied")
        if len(users) == 1:
            return {"channel": {"id": "D" + users[0]}}
        return {"channel": {"id": "G" + "".join(sorted(users))}}

    def _conversations_members(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        info = self.channels.get(channel)
        if info is None:
            raise _ApiError("channel_not_found")
        members = list(info["members"])
        limit = args.get("limit") or 100
        start = int(args["cursor"]) if str(args.get("cursor") or "").isdigit() else 0
        page = members[start : start + limit]
        more = start + limit < len(members)
        return {
            "members": page,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def _users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(str(args.get("user") or ""))
        if user is None:
            raise _ApiError("user_not_found")
        return {"user": json.loads(json.dumps(user))}

    def _usergroups_list(self, args: dict[str, Any]) -> dict[str, Any]:
        groups = []
        for group in self.usergroups.values():
            item = {k: v for k, v in group.items() if k != "users"}
            item["user_count"] = len(group["users"])
            if args.get("include_users"):
                item["users"] = list(group["users"])
            groups.append(item)
        return {"usergroups": groups}

    def _usergroups_users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        group = self.usergroups.get(str(args.get("usergroup") or ""))
        if group is None:
            raise _ApiError("no_such_subteam")
        return {"users": list(group["users"])}

    def _take_trigger(self, args: dict[str, Any]) -> None:
        trigger_id = self._require(args, "trigger_id")
        if trigger_id in self._used_triggers:
            raise _ApiError("exchanged_trigger_id")
        self._used_triggers.add(trigger_id)

    def _store_view(
        self, normalized: dict[str, Any], *, view_id: str | None = None, root_view_id: str | None = None,
        previous_view_id: str | None = None,
    ) -> dict[str, Any]:
        self._view_counter += 1
        view_id = view_id or f"V{self._view_counter:08d}"
        view = {
            "id": view_id,
            "team_id": self.team_id,
            "type": normalized.get("type"),
            "blocks": normalized.get("blocks", []),
            "private_metadata": normalized.get("private_metadata", ""),
            "callback_id": normalized.get("callback_id", ""),
            "external_id": normalized.get("external_id", ""),
            "state": {"values": {}},
            "hash": f"{_TS_BASE}.h{self._view_counter:08d}",
            "clear_on_close": bool(normalized.get("clear_on_close", False)),
            "notify_on_close": bool(normalized.get("notify_on_close", False)),
            "root_view_id": root_view_id or view_id,
            "previous_view_id": previous_view_id,
            "app_id": self.app_id,
            "app_installed_team_id": self.team_id,
            "bot_id": self.bot_id,
        }
        for key in ("title", "submit", "close"):
            if key in normalized:
                view[key] = normalized[key]
        self.views[view_id] = view
        return view

    def _check_external_id(self, normalized: dict[str, Any], *, except_id: str | None = None) -> None:
        external_id = normalized.get("external_id")
        if external_id and any(
            v.get("external_id") == external_id and v["id"] != except_id for v in self.views.values()
        ):
            raise _ApiError("duplicate_external_id")

    def _views_open(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "trigger_id")
        normalized = _validate_view(args.get("view"))
        self._check_external_id(normalized)
        self._take_trigger(args)
        return {"view": self._store_view(normalized)}

    def _views_push(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "trigger_id")
        normalized = _validate_view(args.get("view"))
        self._check_external_id(normalized)
        self._take_trigger(args)
        return {"view": self._store_view(normalized)}

    def _views_update(self, args: dict[str, Any]) -> dict[str, Any]:
        current: dict[str, Any] | None = None
        if args.get("view_id"):
            current = self.views.get(str(args["view_id"]))
        elif args.get("external_id"):
            current = next((v for v in self.views.values() if v["external_id"] == args["external_id"]), None)
        else:
            raise _ApiError("invalid_arguments", ["[ERROR] view_id or external_id is required"])
        if current is None:
            raise _ApiError("not_found")
        normalized = _validate_view(args.get("view"))
        if args.get("hash") and args["hash"] != current["hash"]:
            raise _ApiError("hash_conflict")
        self._check_external_id(normalized, except_id=current["id"])
        if "external_id" not in normalized and current["external_id"]:
            normalized["external_id"] = current["external_id"]
        view = self._store_view(
            normalized, view_id=current["id"], root_view_id=current["root_view_id"],
            previous_view_id=current["previous_view_id"],
        )
        for user_id, home in list(self.home_views.items()):
            if home["id"] == view["id"]:
                self.home_views[user_id] = view
        return {"view": view}

    def _views_publish(self, args: dict[str, Any]) -> dict[str, Any]:
        user_id = self._require(args, "user_id")
        normalized = _validate_view(args.get("view"))
        if normalized.get("type") != "home":
            raise _ApiError("invalid_arguments", ["[ERROR] views.publish requires a home view [json-pointer:/view/type]"])
        current = self.home_views.get(user_id)
        if current is not None and args.get("hash") and args["hash"] != current["hash"]:
            raise _ApiError("hash_conflict")
        view = self._store_view(normalized, view_id=current["id"] if current else None)
        self.home_views[user_id] = view
        return {"view": view}
