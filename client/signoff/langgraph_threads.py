"""Which threads a LangGraph checkpointer holds, and each one's latest checkpoint, read cheaply.

A resumer scans every thread each round; loading each thread's state to learn nothing changed would
cost a read of its blobs. The SQL checkpointers (LangGraph's own SQLite and PostgreSQL savers, blocking
or asyncio) answer one `SELECT thread_id, MAX(checkpoint_id) ... GROUP BY thread_id` (checkpoint ids
grow with time); any other checkpointer is listed through its `list(None)` / `alist(None)`, with
no latest id (its threads are read each round).

Reaches into the savers' tables and connections (`conn`, `lock`, `_cursor`): the `langgraph` extra pins
`langgraph-checkpoint-sqlite` and `langgraph-checkpoint-postgres` below their next major version, and
tests/client/test_langgraph_async.py reads through each of the four.
"""

from __future__ import annotations

import sqlite3
from typing import Any

LATEST = ("SELECT thread_id, MAX(checkpoint_id) AS latest FROM checkpoints WHERE checkpoint_ns = '' "
          "GROUP BY thread_id")
Latest = dict[str, "str | None"]


def _module(checkpointer: Any) -> str:
    return type(checkpointer).__module__


def _rows(rows: Any) -> Latest:
    found: Latest = {}
    for row in rows:
        thread, latest = (row["thread_id"], row["latest"]) if isinstance(row, dict) else (row[0], row[1])
        found[str(thread)] = str(latest) if latest is not None else None
    return found


def latest(checkpointer: Any) -> Latest:
    """Every thread of a blocking checkpointer -> its latest checkpoint id (None where it cannot say)."""
    module = _module(checkpointer)
    conn, lock = getattr(checkpointer, "conn", None), getattr(checkpointer, "lock", None)
    if module.startswith("langgraph.checkpoint.sqlite") and isinstance(conn, sqlite3.Connection) and lock:
        try:
            with lock:
                return _rows(conn.execute(LATEST).fetchall())
        except sqlite3.OperationalError:  # no checkpoint written yet: the saver makes its tables lazily
            return {}
    if module.startswith("langgraph.checkpoint.postgres") and hasattr(checkpointer, "_cursor"):
        import psycopg

        try:
            with checkpointer._cursor() as cur:
                cur.execute(LATEST)
                return _rows(cur.fetchall())
        except psycopg.errors.UndefinedTable:  # setup() not run yet
            return {}
    found: Latest = {}
    for item in checkpointer.list(None):
        found.setdefault(str(item.config["configurable"]["thread_id"]), None)
    return found


async def alatest(checkpointer: Any) -> Latest:
    """`latest` for an asyncio checkpointer (AsyncSqliteSaver, AsyncPostgresSaver, or any `alist`)."""
    module = _module(checkpointer)
    conn, lock = getattr(checkpointer, "conn", None), getattr(checkpointer, "lock", None)
    if module.startswith("langgraph.checkpoint.sqlite") and conn is not None and lock is not None:
        await checkpointer.setup()  # connects it and makes its tables, as each of its own reads does first
        async with lock, conn.execute(LATEST) as cur:
            return _rows(await cur.fetchall())
    if module.startswith("langgraph.checkpoint.postgres") and hasattr(checkpointer, "_cursor"):
        import psycopg

        try:
            async with checkpointer._cursor() as cur:
                await cur.execute(LATEST)
                return _rows(await cur.fetchall())
        except psycopg.errors.UndefinedTable:
            return {}
    found: Latest = {}
    async for item in checkpointer.alist(None):
        found.setdefault(str(item.config["configurable"]["thread_id"]), None)
    return found
