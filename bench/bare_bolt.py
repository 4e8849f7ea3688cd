"""The floor for Signoff's ack latency: a bare slack-bolt AsyncApp served by aiohttp, nothing else.

    PORT=... SLACK_SIGNING_SECRET=... SLACK_API_URL=... python -m bench.bare_bolt

Same Bolt configuration as Signoff's (`bot/process/slack_listeners.py`): signing secret, request verification on,
`process_before_response=False`, a bot-token client pointed at the fake Web API (so Bolt's
single-workspace authorization calls auth.test once, as Signoff's does). One listener,
`app.action("signoff_approve")`, that only acks. Served by Bolt's own aiohttp adapter
(`AsyncApp.web_app()`), plus `GET /healthz` so the bench knows when it is up.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
from typing import Any

from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient


def build(signing_secret: str, api_url: str) -> web.Application:
    client = AsyncWebClient(token="xoxb-test", base_url=api_url, timeout=10)
    app = AsyncApp(client=client, signing_secret=signing_secret, process_before_response=False)

    @app.action("signoff_approve")
    async def approve(ack: Any) -> None:
        await ack()

    web_app = app.web_app(path="/slack/events")

    async def healthz(_request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    web_app.router.add_get("/healthz", healthz)
    return web_app


async def _serve() -> None:
    web_app = build(os.environ["SLACK_SIGNING_SECRET"], os.environ["SLACK_API_URL"])
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", int(os.environ["PORT"])).start()
    # The same GC settings as `signoff serve`, so the floor and Signoff differ only in what the app does.
    gc.freeze()
    gc.set_threshold(50_000, 10, 10)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(_serve())
