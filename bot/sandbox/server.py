"""The Slack Web API emulator, served over real HTTP by aiohttp: what the tests, the benchmarks and
``signoff demo`` point the bot's ``SLACK_API_URL`` at.

Point the real ``slack_sdk.web.async_client.AsyncWebClient`` at it::

    fake = SlackEmulator()
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
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from bot.sandbox.chat import ChatMethods
from bot.sandbox.conversations import ConversationMethods
from bot.sandbox.errors import ApiError
from bot.sandbox.faults import Delay, Fault, Faults
from bot.sandbox.local_only import local_only
from bot.sandbox.scopes import missing_scope
from bot.sandbox.socket_mode import SocketModeServer
from bot.sandbox.state import Call
from bot.sandbox.views import ViewMethods

__all__ = ["SlackEmulator"]

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


class SlackEmulator(Faults, ChatMethods, ConversationMethods, ViewMethods):
    """A stateful emulator of the Slack Web API on 127.0.0.1 (its own port, or attached to an app), one event loop.

    Arrange directory state with ``add_user``/``add_usergroup``/``add_channel``, inspect
    ``calls``, ``messages``, ``ephemerals``, ``views`` and ``home_views``, synchronise
    with ``wait_for`` and inject faults with ``fail``/``error``/``delay``/``hang``.
    Faults are queued per method and consumed first in, first out; delays are a
    separate queue, so a delay combines with a following fault.
    """

    def __init__(self, *, bot_token: str = "xoxb-test", bot_user_id: str = "UBOT", team_id: str = "T1") -> None:
        super().__init__(bot_token=bot_token, bot_user_id=bot_user_id, team_id=team_id)
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
        self.socket_mode = SocketModeServer()
        self._handlers["apps.connections.open"] = self._apps_connections_open

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Serve on 127.0.0.1 with an ephemeral port; sets ``url``."""
        app = web.Application(middlewares=[local_only])
        app.router.add_route("*", "/api/{method}", self._handle)
        app.router.add_get("/socket", self.socket_mode.handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}/api/"

    def attach(self, app: web.Application, base_url: str, prefix: str = "/sandbox/slack") -> None:
        """Serve on another aiohttp app (``signoff demo``: one port for everything); sets ``url``."""
        app.router.add_route("*", prefix + "/api/{method}", self._handle)
        app.router.add_get(prefix + "/socket", self.socket_mode.handle)
        self.url = base_url.rstrip("/") + prefix + "/api/"

    async def stop(self) -> None:
        """Release hung and delayed requests, then shut the server down."""
        self._stopping.set()
        self.release_hung()
        await self.socket_mode.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> SlackEmulator:
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

        delay: Delay | None = self._take(self._delays, method)
        if delay is not None and not self._stopping.is_set():
            try:
                await asyncio.wait_for(self._stopping.wait(), delay.seconds)
            except TimeoutError:
                pass

        fault: Fault | None = self._take(self._faults, method)
        headers: dict[str, str] = {}
        status = 200
        if fault is not None and fault.kind == "fail":
            status = fault.status
            body: dict[str, Any] = {"ok": False, "error": "ratelimited" if status == 429 else "internal_error"}
            if status == 429 and fault.retry_after is not None:
                headers["Retry-After"] = str(fault.retry_after)
        elif fault is not None and fault.kind == "error":
            body = {"ok": False, "error": fault.error}
        elif fault is not None and fault.kind == "hang":
            return await self._hang(call, args, token, fault.apply)
        elif fault is not None and fault.kind == "drop":
            call.status, call.ok, call.response = 0, False, {}
            self._notify()
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=499)  # written to nobody: the connection is gone
        elif (wait := self._paced(method, args)) is not None:
            status, body = 429, {"ok": False, "error": "ratelimited"}
            headers["Retry-After"] = str(wait)
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
        if self.scopes is not None and (refused := missing_scope(method, self.scopes)) is not None:
            return refused
        try:
            return {"ok": True, **handler(args)}
        except ApiError as exc:
            return exc.body()
        except Exception as exc:  # a bug in the fake: answer visibly instead of a bare 500
            log.exception("the Slack emulator failed handling %s", method)
            return {"ok": False, "error": "fake_slack_bug", "detail": repr(exc)}

    # ------------------------------------------------------------------ methods

    def _apps_connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"url": self.url.replace("http://", "ws://").replace("/api/", "/socket")}

