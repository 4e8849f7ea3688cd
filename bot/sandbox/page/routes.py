"""The sandbox page's HTTP side: the page, its panes, live updates (server-sent events) and actions.

    GET  /                  the page (the person and channel come from the query string)
    GET  /sandbox/pane      one person's view as HTML pieces (JSON), what the script swaps in
    GET  /sandbox/events    server-sent events: "changed" whenever the emulator's state changes
    POST /sandbox/act       a click, a modal submit or close, a message or /command, opening Home
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from aiohttp import web

from bot.sandbox.page.actions import BadAction, PageActions
from bot.sandbox.page.mrkdwn import esc
from bot.sandbox.page.render import Where, nav, pane
from bot.sandbox.server import SlackEmulator

PING_SECONDS = 15.0


@dataclass(frozen=True)
class Connect:
    """What an engineer needs to point an agent at this sandbox: the `export` lines and the ids to use."""

    exports: list[str]
    channel: str
    people: list[tuple[str, str, str]]  # (user id, name, role)

    def html(self) -> str:
        lines = esc("\n".join(self.exports))
        people = ", ".join(f"<code>{esc(uid)}</code> ({esc(name)}, {esc(role)})" for uid, name, role in self.people)
        return (
            '<details class="connect" id="connect"><summary>Connect an agent</summary><div class="connect-body">'
            "<p>To try an integration, paste into a shell:</p>"
            f'<pre id="exports">{lines}</pre>'
            '<button type="button" class="btn" data-copy="exports">Copy</button>'
            f"<p>Cards go to <code>{esc(self.channel)}</code> (#approvals). People: {people}.</p>"
            "<p>The token stays the same when the sandbox restarts. The demo agent (<code>/signoff run</code>) plays "
            "one script whatever the task, taking only an email address from it; set ANTHROPIC_API_KEY before "
            "<code>signoff demo</code> for Claude. Whoever starts a run cannot approve its cards: be someone else "
            "under “You are”.</p></div></details>")


class SandboxPage:
    def __init__(self, slack: SlackEmulator, actions: PageActions, people: list[tuple[str, str]],
                 default_channel: str, connect: Connect | None = None) -> None:
        self.slack = slack
        self.connect = connect
        self.actions = actions
        self.people = people  # (user id, label such as "Alice (approver)")
        self.default_channel = default_channel
        self._closing = asyncio.Event()
        self._static = resources.files("bot.sandbox.page") / "static"

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/", self.index)
        app.router.add_get("/sandbox/pane", self.pane)
        app.router.add_get("/sandbox/events", self.events)
        app.router.add_post("/sandbox/act", self.act)
        app.router.add_get("/sandbox/static/{name}", self.static)
        app.on_shutdown.append(self._on_shutdown)

    async def _on_shutdown(self, _app: web.Application) -> None:
        self._closing.set()  # ends the event streams, so shutdown does not wait for open pages

    def _where(self, query: Any) -> Where:
        user = str(query.get("user") or self.people[0][0])
        if user not in self.slack.users:
            raise web.HTTPBadRequest(text=f"unknown user {user!r}")
        channel = str(query.get("channel") or self.default_channel)
        return Where(user, channel, str(query.get("thread") or "") or None, query.get("home") == "1")

    async def index(self, request: web.Request) -> web.Response:
        where = self._where(request.query)
        boot = {"user": where.user, "channel": where.channel, "thread": where.thread, "home": where.home}
        options = "".join(f'<option value="{esc(uid)}"{" selected" if uid == where.user else ""}>{esc(label)}</option>'
                          for uid, label in self.people)
        first = pane(self.slack, self.actions.modals, where)
        page = _PAGE.format(
            boot=json.dumps(boot).replace("<", "\\u003c"), people=options,
            connect=self.connect.html() if self.connect else "", nav=nav(self.slack, where), main=first["main"],
            modal=first["modal"], modal_key=esc(first["modal_key"]), title=esc(first["title"]))
        return web.Response(text=page, content_type="text/html", headers=_NO_STORE)

    async def pane(self, request: web.Request) -> web.Response:
        where = self._where(request.query)
        body = pane(self.slack, self.actions.modals, where)
        body["nav"] = nav(self.slack, where)
        return web.json_response(body, headers=_NO_STORE)

    async def events(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **_NO_STORE})
        await response.prepare(request)
        changed = asyncio.Event()
        self.slack.listeners.append(changed.set)
        closing = asyncio.ensure_future(self._closing.wait())
        try:
            await response.write(b"retry: 1000\ndata: hello\n\n")
            while not self._closing.is_set():
                waiter = asyncio.ensure_future(changed.wait())
                done, _ = await asyncio.wait({waiter, closing}, timeout=PING_SECONDS,
                                             return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                if closing in done:
                    break
                changed.clear()
                await response.write(b"data: changed\n\n" if done else b": ping\n\n")
        except (ConnectionResetError, RuntimeError):
            pass  # the page went away
        finally:
            closing.cancel()
            with contextlib.suppress(ValueError):
                self.slack.listeners.remove(changed.set)
        return response

    async def act(self, request: web.Request) -> web.Response:
        try:
            act = await request.json()
            if not isinstance(act, dict):
                raise BadAction("the body must be a JSON object")
            result = await self.actions.handle(act)
        except (BadAction, ValueError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response(result)

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        kinds = {"page.js": "application/javascript", "page.css": "text/css"}
        if name not in kinds:
            raise web.HTTPNotFound()
        return web.Response(text=(self._static / name).read_text(encoding="utf-8"), content_type=kinds[name])


_NO_STORE = {"Cache-Control": "no-store"}

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Signoff sandbox</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/sandbox/static/page.css">
</head><body>
<header class="top">
  <strong class="brand">Signoff sandbox</strong>
  <span class="where" id="title">{title}</span>
  <label class="who">You are <select id="who">{people}</select></label>
  {connect}
</header>
<div class="layout">
  <nav id="nav">{nav}</nav>
  <div class="col">
    <main id="main">{main}</main>
    <form id="composer" autocomplete="off">
      <input id="say" name="text" placeholder="Message, or /signoff help" aria-label="Message">
      <button type="submit" class="btn primary">Send</button>
    </form>
  </div>
</div>
<div id="modal-root" data-key="{modal_key}">{modal}</div>
<div id="toast" role="status" hidden></div>
<script type="application/json" id="boot">{boot}</script>
<script src="/sandbox/static/page.js"></script>
</body></html>
"""
