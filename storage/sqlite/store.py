"""The store on SQLite: one writer per file, statements on the event loop, driver SQL on hot paths.

- SQLite allows one writer at a time. Write units take this process's writer (storage/sqlite/engine.py:
  one connection, queued in-process) and open with `BEGIN IMMEDIATE`, so writers queue instead of
  failing with "database is locked" when a read lock would have to be upgraded; a wait for another
  process on the same file happens on aiosqlite's worker thread with a 30 s busy timeout (statements
  themselves run on the loop: storage/sqlite/driver.py).
- The hottest statements skip SQLAlchemy's per-statement cost and run as driver SQL on the unit's own
  sqlite3 connection (storage/sqlite/fast.py); a request read on a file needs no pool checkout at all
  (`fast.Reader`). Each returns exactly what SQLAlchemy's statement would (tests/storage/test_sqlite_fast.py).
- A lone unit is the ordinary unit: with one writer there is no round trip to save.
- Other processes' commits are seen through `PRAGMA data_version` (`foreign_data_version`), not NOTIFY.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.domain.model import AuditEvent, Decision, Request
from storage import sql_statements as q
from bot.domain.outbox import OutboxItem
from storage.base import Change, Expect, Reminded, T
from storage.group_commit import SharedUnits
from storage.rows import mutable_columns, outbox_from_row
from storage.schema import audit_events, slack_received
from storage.sql import SqlStore, SqlUnit
from storage.sqlite import driver, fast, writes
from storage.sqlite.engine import SqliteWriter, sqlite_engine
from storage.urls import async_url
from storage.values import audit_values, decision_values, outbox_values, request_values


class SqliteUnit(SqlUnit):
    postgres = False

    async def insert_pending(self, request: Request, audit: AuditEvent, card: OutboxItem, people: Sequence[str],
                             homes: Sequence[tuple[str, OutboxItem]], *, expects: Sequence[Expect] = ()) -> None:
        await self.verify(expects)  # read here: one writer, so they hold until the unit commits
        with self._keyed(request):
            await writes.insert_pending(self.conn, *self._pending_rows(request, audit, card, people, homes))
        self.enqueued += 1  # wakes the dispatcher (a dedupe_key already taken: it finds nothing)

    async def insert_decided(self, request: Request, events: Sequence[AuditEvent]) -> None:
        assert request.decision is not None
        with self._keyed(request):
            await writes.insert_decided(self.conn, request_values(request),
                                        decision_values(request.id, request.decision), [audit_values(e) for e in events])

    async def write_reminders(self, reminders: Sequence[Reminded]) -> list[str]:
        written, stored = await writes.write_reminders(self.conn, reminders)
        self.enqueued += stored
        return written

    async def get_request(self, request_id: str) -> Request | None:
        return await fast.get_request(self.conn, request_id)  # the hottest read: driver SQL

    async def update_request(self, request: Request, *, expected_version: int) -> bool:
        return await fast.update_request(self.conn, request.id, expected_version, mutable_columns(request))

    async def record_decision(self, request_id: str, decision: Decision, audit: AuditEvent,
                              items: Sequence[OutboxItem]) -> None:
        # No round trips to save, but SQLAlchemy's cost per statement: driver SQL.
        self.enqueued += await fast.record_decision(
            self.conn, decision_values(request_id, decision), audit_values(audit), [outbox_values(i) for i in items])

    async def outbox_done_many(self, done: Sequence[tuple[int, datetime]]) -> None:
        if done:
            await fast.outbox_done(self.conn, done)

    async def home_users_of(self, request_id: str, also: Iterable[str] = ()) -> set[str]:
        return await fast.home_users_of(self.conn, request_id, list(dict.fromkeys(also)))

    async def append_audits(self, events: Sequence[AuditEvent]) -> None:
        if events:
            await fast.insert_rows(self.conn, audit_events, [audit_values(e) for e in events])

    async def store_card(self, request_id: str, channel: str, ts: str, now: datetime) -> bool:
        # One statement, no read: the guard is `card_ts IS NULL`, so a second post's ts never replaces it.
        params = {"rid": request_id, "b_channel": channel, "b_ts": ts, "b_now": now}
        return (await fast.run(self.conn, q.STORE_CARD, params)).rowcount == 1

    def _insert_ignore_keys(self, table: sa.Table, values: dict[str, Any], keys: list[str]) -> Any:
        return sqlite_insert(table).values(**values).on_conflict_do_nothing(index_elements=keys)


_ADD_RECEIVED = (sqlite_insert(slack_received)
                 .values(key=sa.bindparam("b_key"), body=sa.bindparam("b_body"), content_type=sa.bindparam("b_type"),
                         received_at=sa.bindparam("b_at"), lease_until=sa.bindparam("b_until"), attempts=1)
                 .on_conflict_do_nothing(index_elements=["key"]).returning(slack_received.c.id))
_DONE_RECEIVED = (slack_received.update().where(slack_received.c.id == sa.bindparam("b_id"))
                  .values(done_at=sa.bindparam("b_now")))


class SqliteStore(SqlStore):
    """The store on a SQLite file. Open with `await storage.stores.open_store("sqlite:///...")`."""

    unit_class = SqliteUnit

    def __init__(self, engine: AsyncEngine, write_engine: AsyncEngine, reader: fast.Reader | None = None) -> None:
        super().__init__(engine, write_engine)
        self._reader = reader  # request reads without a pool checkout (a file; not :memory:)
        self._writer = SqliteWriter(self.write_engine)  # one writer per file: our own writers queue here
        self._shared = SharedUnits(self.unit)  # shared changes waiting at the same time: one unit

    @classmethod
    async def connect(cls, database_url: str) -> SqliteStore:
        url = async_url(database_url)
        read = sqlite_engine(database_url, begin=None)  # reads: one statement, one snapshot
        (filename,), _ = SQLiteDialect_aiosqlite().create_connect_args(url)
        reader = fast.Reader(filename, read.dialect) if url.database not in (None, "", ":memory:") else None
        return cls(read, sqlite_engine(database_url, begin="BEGIN IMMEDIATE"), reader)

    async def run_change(self, change: Change[T], *, shared: bool = False) -> T:
        if shared:  # one writer: the changes waiting for it share its next transaction
            return await self._shared.run(change)
        return await super().run_change(change)

    @asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[AsyncConnection]:
        # The readers run without BEGIN (one statement, one snapshot): a deferred BEGIN holds the WAL
        # snapshot of its first read until the ROLLBACK, and takes no lock.
        async with self.engine.connect() as conn:
            await conn.exec_driver_sql("BEGIN")
            try:
                yield conn
            finally:
                await conn.exec_driver_sql("ROLLBACK")

    def _watched_engine(self) -> AsyncEngine:
        return self.engine  # the readers' (the writer's statements are in its own trace)

    def _traced(self) -> list[Callable[[str], None]]:
        return self._writer.watchers  # the writer's sqlite3 trace: SQLAlchemy's statements and driver SQL

    def _unit_connection(self) -> AbstractAsyncContextManager[AsyncConnection]:
        return self._writer.connection()

    async def foreign_data_version(self) -> int:
        """`PRAGMA data_version` on this process's writer connection. It changes only when ANOTHER
        connection commits, and this process's other connections only read: so it moves with other
        processes' commits, never with this process's own (which already woke their waiters). Read
        between this process's write units (behind the write lock, no transaction)."""
        async with self._writer.connection() as conn:
            aio: Any = (await conn.get_raw_connection()).driver_connection
            # The sqlite3 connection itself: SQLAlchemy's execute would open a transaction (BEGIN IMMEDIATE).
            return int(driver.sqlite3_of(aio).execute("PRAGMA data_version").fetchone()[0])

    async def get_request(self, request_id: str) -> Request | None:
        if self._reader is not None:
            try:
                return self._reader.get_request(request_id)
            except sqlite3.OperationalError as exc:  # it met a lock: read through the pool, which waits for it
                if not driver.busy(exc):
                    raise
        return await super().get_request(request_id)

    async def count_pending(self, owner: str) -> int:
        # On every submit that waits for a person: read as get_request reads (no pool checkout).
        if self._reader is not None:
            try:
                return int(self._reader.scalar(q.COUNT_PENDING_SQL["?"], (owner,)))
            except sqlite3.OperationalError as exc:  # it met a lock: read through the pool, which waits for it
                if not driver.busy(exc):
                    raise
        return await super().count_pending(owner)

    async def add_received(self, rows: Sequence[tuple[str, str, str]], now: datetime, lease_until: datetime,
                           done: Sequence[int]) -> list[tuple[int, str]]:
        # Driver SQL (storage/sqlite/fast.py: a Core statement costs about three times SQLite's own work,
        # and this is on every click's way to its ack), behind this process's one writer.
        added: list[tuple[int, str]] = []
        async with self.unit() as unit:
            for key, body, content_type in rows:
                row = (await fast.run(unit.conn, _ADD_RECEIVED, {
                    "b_key": key, "b_body": body, "b_type": content_type, "b_at": now, "b_until": lease_until,
                })).fetchone()
                if row is not None:
                    added.append((row[0], key))
            for row_id in done:
                await fast.run(unit.conn, _DONE_RECEIVED, {"b_id": row_id, "b_now": now})
        return added

    async def claim_outbox(self, now: datetime, *, limit: int, lease_seconds: float) -> list[OutboxItem]:
        params = {"b_now": now, "b_limit": limit, "b_lease": now + timedelta(seconds=lease_seconds)}
        async with self.unit() as unit:  # behind this process's write lock, in a BEGIN IMMEDIATE
            rows = await fast.mapped(unit.conn, q.CLAIM_OUTBOX[False], params)
        return sorted((outbox_from_row(r) for r in rows), key=lambda i: i.id or 0)

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        await self._writer.close()
        await super().close()
