"""The floor for an HTTP hook: a bare aiohttp handler that checks a bearer token, reads the JSON body,
INSERTs one row into a SQLite file (WAL, synchronous=NORMAL, as Signoff's engine) and answers `allow`.

    PORT=... BARE_DB=path.db BARE_TOKEN=... python -m bench.bare_insert

The same GC settings as `signoff serve`, and `GET /healthz` so the bench knows when it is up.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import sqlite3
import uuid

from aiohttp import web


def build(db_path: str, token: str) -> web.Application:
    db = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE IF NOT EXISTS calls (id TEXT PRIMARY KEY, body TEXT NOT NULL)")
    expected = f"Bearer {token}"

    async def hook(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != expected:
            return web.json_response({"error": "unauthorized"}, status=401)
        body = json.loads(await request.read())
        db.execute("INSERT INTO calls (id, body) VALUES (?, ?)", (uuid.uuid4().hex, json.dumps(body)))
        return web.json_response({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                                         "permissionDecision": "allow"}})

    async def healthz(_request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/hook", hook)
    app.router.add_get("/healthz", healthz)
    return app


async def _serve() -> None:
    runner = web.AppRunner(build(os.environ["BARE_DB"], os.environ["BARE_TOKEN"]), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", int(os.environ["PORT"])).start()
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
