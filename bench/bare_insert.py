"""The floor for an HTTP hook: a bare aiohttp handler that checks a bearer token, reads the JSON body,
writes to a SQLite file (WAL, synchronous=NORMAL, as Signoff's engine) and answers `allow`.

    PORT=... BARE_DB=path.db BARE_TOKEN=... [BARE_ROWS=rows.json] python -m bench.bare_insert

Without BARE_ROWS it INSERTs one row into a one-table file: the floor issue 36 states its target
against. With BARE_ROWS (bench.hooks writes it from Signoff's own file after its warm-up: the schema
and the rows one allowed call stored) it writes those rows instead, each call a new id, key and time,
in one transaction with foreign keys on, as Signoff's write unit does: what the same storage costs
with no Signoff code around it.

The same GC settings as `signoff serve`, and `GET /healthz` so the bench knows when it is up.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import os
import signal
import sqlite3
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

# The columns a call's rows get new values in: its id, its idempotency key, its times.
FRESH = {"requests": ("id", "idempotency_key", "created_at", "updated_at"),
         "decisions": ("request_id", "decided_at"), "audit_events": ("request_id", "at")}


def rows_of(db: sqlite3.Connection, request_id: str) -> dict[str, Any]:
    """What bench.hooks hands BARE_ROWS: `db`'s schema and the rows stored for `request_id`."""
    db.row_factory = sqlite3.Row
    schema = [sql for (sql,) in db.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL "
                                           "AND name NOT LIKE 'sqlite_%' "
                                           "ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 ELSE 2 END, name")]
    rows = {table: [dict(r) for r in db.execute(f"SELECT * FROM {table} WHERE "
                                                f"{'id' if table == 'requests' else 'request_id'} = ?",
                                                (request_id,))] for table in FRESH}
    for row in rows["audit_events"]:  # as written: the id is the table's, the chain's columns come later
        for column in ("id", "seq", "prev_hash", "hash"):
            row.pop(column, None)
    return {"schema": schema, "rows": rows}


def _writer(db: sqlite3.Connection, rows_path: str) -> Callable[[], None]:
    shape = json.loads(Path(rows_path).read_text(encoding="utf-8"))
    for sql in shape["schema"]:
        db.execute(sql)
    db.execute("PRAGMA foreign_keys=ON")
    plan = []
    for table, rows in shape["rows"].items():
        for row in rows:
            columns = list(row)
            plan.append((f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                         [FRESH[table].count(c) and c for c in columns], list(row.values())))

    session, calls = uuid.uuid4().hex, itertools.count()

    def write() -> None:
        # Ids in time order and keys along one session, as Signoff's are (each lands at its index's end).
        n = next(calls)
        fresh = {"id": f"apr_{time.time_ns():020d}{n:06d}", "request_id": None,
                 "idempotency_key": f"claude-code:{session}:toolu_{n:06d}",
                 "at": datetime.now(UTC).replace(tzinfo=None).isoformat(" ")}
        fresh["request_id"] = fresh["id"]
        db.execute("BEGIN IMMEDIATE")
        for sql, new, values in plan:
            db.execute(sql, [fresh.get(n, fresh["at"]) if n else v for n, v in zip(new, values, strict=True)])
        db.execute("COMMIT")

    return write


def build(db_path: str, token: str, rows_path: str | None = None) -> web.Application:
    db = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    expected = f"Bearer {token}"
    if rows_path:
        write = _writer(db, rows_path)
    else:
        db.execute("CREATE TABLE IF NOT EXISTS calls (id TEXT PRIMARY KEY, body TEXT NOT NULL)")

    async def hook(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != expected:
            return web.json_response({"error": "unauthorized"}, status=401)
        body = json.loads(await request.read())
        if rows_path:
            write()
        else:
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
    app = build(os.environ["BARE_DB"], os.environ["BARE_TOKEN"], os.environ.get("BARE_ROWS"))
    runner = web.AppRunner(app, access_log=None)
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
