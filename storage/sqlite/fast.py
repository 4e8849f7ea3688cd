"""SQLite: a decision's statements and the request read as driver SQL on the unit's own connection.

A button decision is a check read, then a unit of the guarded UPDATE, the App Home users' read and
three inserts. Through SQLAlchemy Core each statement cost about three times SQLite's own work
(execution context, parameter compilation, result set-up: in-process, ~120 µs a statement against
~40 µs in sqlite3), so the decision and the reads behind every click, card and long-poll run here as
plain sqlite3 calls instead, on the connection SQLAlchemy checked out (a unit's, inside its
BEGIN IMMEDIATE; a reader's), through InlineConnection's `_execute` so a statement that meets another
process's lock still waits on the worker thread (storage/sqlite/driver.py).

Invariant: the same rows and the same values as the SQLAlchemy statements they replace. Parameters
go through each column type's own bind processor for the engine's dialect (JSON as SQLAlchemy
serialises it, UTC datetimes as UTCDateTime stores them; storage/inserts.py), results through each
column type's own result processor (the engine's JSON deserializer included), so
tests/storage/test_sqlite_fast.py finds the raw rows and the read requests equal both ways.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.model import Request
from storage.sqlite import driver as sqlite_driver
from storage.inserts import table_insert
from storage.rows import driver_statement, request_read
from storage.schema import audit_events, decisions, home_users, outbox, request_people, requests


async def execute(conn: AsyncConnection, sql: str, params: Sequence[Any]) -> sqlite3.Cursor:
    """`sql` on the connection's own sqlite3 connection (waiting for another process's lock off the loop)."""
    try:
        cursor: sqlite3.Cursor = await sqlite_driver.execute(sqlite_driver.aio(conn), sql, params)
    except sqlite3.IntegrityError as exc:  # as SQLAlchemy reports it
        raise IntegrityError(sql, params, exc) from exc
    return cursor


async def run(conn: AsyncConnection, stmt: Any, params: dict[str, Any]) -> sqlite3.Cursor:
    """A Core statement built once (storage/sql_statements.py) as driver SQL on the unit's connection:
    the same text, each parameter through its bind processor (rows: `mapped`)."""
    found = driver_statement(stmt, conn.dialect)
    return await execute(conn, found.sql, found.params(params))


async def mapped(conn: AsyncConnection, stmt: Any, params: dict[str, Any]) -> list[Any]:
    """`run`'s rows, each mapped as SQLAlchemy maps it (its columns' result processors)."""
    return [driver_statement(stmt, conn.dialect).mapped(row) for row in (await run(conn, stmt, params)).fetchall()]


async def one(conn: AsyncConnection, stmt: Any, params: dict[str, Any]) -> tuple[Any, ...]:
    """`run`'s one row's values, as SQLAlchemy returns them."""
    rows = (await run(conn, stmt, params)).fetchall()
    assert len(rows) == 1, f"{len(rows)} rows where one was required"
    return driver_statement(stmt, conn.dialect).values(rows[0])


CHUNK = 200  # rows per multi-row statement: 200 x a few columns, far below SQLite's parameter limit


async def insert_rows(conn: AsyncConnection, table: Any, rows: Sequence[dict[str, Any]]) -> None:
    """`rows` (all with the first row's columns, in its order) in INSERTs of up to CHUNK rows."""
    insert = table_insert(table, rows[0], conn.dialect)
    assert all(tuple(row) == insert.names for row in rows), "rows of one shape"
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start:start + CHUNK]
        await execute(conn, insert.sql(len(chunk)), [v for row in chunk for v in insert.values(row)])


async def outbox_done(conn: AsyncConnection, done: Sequence[tuple[int, datetime]]) -> None:
    """The items `done` (id, when) marked done: ONE statement per CHUNK (UPDATE ... FROM VALUES), as
    the executemany of OUTBOX_DONE was one call."""
    rows = [{"id": item_id, "done_at": at} for item_id, at in done]
    if not rows:
        return
    mark = table_insert(outbox, rows[0], conn.dialect)  # the values' bind processors
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start:start + CHUNK]
        sql = (f"UPDATE outbox SET status = 'done', done_at = x.column2, lease_until = NULL "
               f"FROM (VALUES {', '.join(['(?, ?)'] * len(chunk))}) AS x WHERE outbox.id = x.column1")
        await execute(conn, sql, [v for row in chunk for v in mark.values(row)])


class _Update:
    """The guarded write of `update_request` for one set of columns (its values go through the same
    per-column processors as an insert of those columns: `decided.table_insert`)."""

    def __init__(self, names: tuple[str, ...], dialect: Dialect) -> None:
        quote = dialect.identifier_preparer
        sets = ", ".join(f"{quote.format_column(requests.c[n])} = ?" for n in ("version", *names))
        self.sql = f"UPDATE {quote.format_table(requests)} SET {sets} WHERE id = ? AND version = ?"


_UPDATES: dict[tuple[int, tuple[str, ...]], _Update] = {}


async def get_request(conn: AsyncConnection, request_id: str) -> Request | None:
    read = request_read(conn.dialect)
    rows = (await execute(conn, read.sql, (request_id,))).fetchall()  # to the end: the statement resets
    return read.request(rows[0]) if rows else None


async def update_request(conn: AsyncConnection, request_id: str, expected: int, values: dict[str, Any]) -> bool:
    """The version-guarded UPDATE of `values` (mutable_columns); False if the version moved."""
    key = (id(conn.dialect), tuple(values))
    update = _UPDATES.get(key)
    if update is None:
        update = _UPDATES[key] = _Update(tuple(values), conn.dialect)
    params = [expected + 1, *table_insert(requests, values, conn.dialect).values(values), request_id, expected]
    return (await execute(conn, update.sql, params)).rowcount == 1


_HOME_USERS_OF = (f"SELECT user_id FROM {home_users.name} WHERE user_id IN "
                  f"(SELECT user_id FROM {request_people.name} WHERE request_id = ?)")


async def home_users_of(conn: AsyncConnection, request_id: str, also: Sequence[str]) -> set[str]:
    sql = _HOME_USERS_OF + (f" OR user_id IN ({', '.join('?' * len(also))})" if also else "")
    return {row[0] for row in (await execute(conn, sql, (request_id, *also))).fetchall()}


async def record_decision(conn: AsyncConnection, decision: dict[str, Any], audit: dict[str, Any],
                          items: Sequence[dict[str, Any]]) -> int:
    """The decision's row, its audit row and its outbox items (a dedupe_key already taken skipped, as
    `SqlUnit.enqueue` does); returns how many items were stored."""
    for table, row in ((decisions, decision), (audit_events, audit)):
        insert = table_insert(table, row, conn.dialect)
        await execute(conn, insert.sql(1), insert.values(row))
    if not items:
        return 0
    insert = table_insert(outbox, items[0], conn.dialect)
    values = [v for item in items for v in insert.values(item)]
    cursor = await execute(conn, insert.sql(len(items)) + " ON CONFLICT (dedupe_key) DO NOTHING", values)
    return cursor.rowcount


class Reader:
    """A request read that never yields: one sqlite3 connection of its own, used on the loop's thread.

    Checking a connection out of SQLAlchemy's pool and back (greenlet, pool events, the reset on
    return) cost more than the read itself. A read here runs to completion without an `await`, so
    no other coroutine can use the connection meanwhile, and one connection serves every read. Each
    read is its own statement in autocommit mode: it sees every commit made before it (WAL).
    It never waits: with a busy timeout of 0, the rare read that meets a lock (another process
    recovering the WAL) raises sqlite3.OperationalError and the caller reads through the pool instead.
    """

    def __init__(self, filename: str, dialect: Dialect) -> None:
        self._filename = filename
        self._read = request_read(dialect)
        self._conn: sqlite3.Connection | None = None

    def get_request(self, request_id: str) -> Request | None:
        if self._conn is None:
            self._conn = sqlite3.connect(self._filename, timeout=0, check_same_thread=False, isolation_level=None)
        rows = self._conn.execute(self._read.sql, (request_id,)).fetchall()
        return self._read.request(rows[0]) if rows else None

    def scalar(self, sql: str, params: Sequence[Any]) -> Any:
        """The first column of the first row of driver-level `sql` (e.g. a count), read the same way."""
        if self._conn is None:
            self._conn = sqlite3.connect(self._filename, timeout=0, check_same_thread=False, isolation_level=None)
        return self._conn.execute(sql, tuple(params)).fetchone()[0]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
