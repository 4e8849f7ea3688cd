"""SQLite engines for the store: WAL mode, statements on the event loop's thread, one writer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.util import await_only

from bot.domain.json_codec import loads
from storage.sqlite import driver as sqlite_driver
from storage.sqlite.driver import inline_creator
from storage.urls import async_url


def sqlite_engine(database_url: str, *, begin: str | None = "BEGIN IMMEDIATE") -> AsyncEngine:
    """An engine on a SQLite file in WAL mode; `begin` is the statement that opens a transaction.

    Statements run on the event loop's thread (storage/sqlite/driver.py): only a wait for another
    process's lock goes to aiosqlite's worker thread.
    """
    url = async_url(database_url)
    (filename,), options = SQLiteDialect_aiosqlite().create_connect_args(url)
    kwargs: dict[str, Any] = {"async_creator": inline_creator(filename, **options), "json_deserializer": loads}
    if begin is not None:
        # The writer: one connection, held by SqliteWriter (SQLite allows one writer), and one for whoever
        # writes through the engine directly.
        kwargs.update(pool_size=1, max_overflow=1)
    else:
        # Readers: SQLAlchemy closes a connection checked in beyond `pool_size`, and with the default
        # 5 (+ 10) every peak of concurrent reads (50 agents' long-polls and GETs) opened and closed
        # connections, each with its aiosqlite thread: 8 % of the server's e2e samples (Thread.start,
        # Connection.stop, raw_connection). 16 stay open; 30 at most, as on PostgreSQL.
        kwargs.update(pool_size=16, max_overflow=14)
    engine = create_async_engine(url, **kwargs)
    _configure_sqlite(engine, begin=begin)
    return engine


def _configure_sqlite(engine: AsyncEngine, *, begin: str | None) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        # Busy timeout 0: a statement that would wait for another process's lock fails at once and is
        # run again, with the full timeout, on the connection's worker thread (storage/sqlite/driver.py).
        cursor.execute("PRAGMA busy_timeout=0")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    if begin is not None:

        @event.listens_for(engine.sync_engine, "begin")
        def _begin(conn: Any) -> None:
            # On the sqlite3 connection through the connection's own `_execute` (inline; a BEGIN that
            # meets another process's lock waits on the worker thread, like every statement): through
            # `exec_driver_sql` it was also a statement execution of SQLAlchemy's (context, cursor,
            # result) per unit. An empty unit: 368k instructions that way, 228k this way.
            await_only(sqlite_driver.execute(conn.connection.driver_connection, begin))


class SqliteWriter:
    """This process's one SQLite writer: its write units queue on `lock` (not in SQLite's busy handler)
    and run one at a time on ONE connection, kept checked out between them.

    A checkout and a check-in through SQLAlchemy's pool were two more greenlet calls per unit, and the
    check-in a task of its own (about a sixth of the greenlets an approval ran on SQLite, in whose e2e
    every approval is several units: the submit, the outbox's claims and results, the decision).

    Invariants:
    - Every unit yields to the event loop before it starts (tests/storage/test_lone_unit.py).
    - One unit at a time, each on the same connection, so `PRAGMA data_version` read on it moves only
      with other connections' commits (bot/live/waiters.py), as when the pool held that one connection.
    - A unit that ends still inside its transaction (its rollback failed or was cancelled), or on an
      invalidated connection, closes that connection: the next unit opens a new one.
    - The engine's pool allows one connection more than the held one, for whoever writes through the
      engine directly (migrations, tools): like another process, it meets the file's lock, not ours.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.lock = asyncio.Lock()
        self._conn: AsyncConnection | None = None
        self.watchers: list[Callable[[str], None]] = []  # every statement on the writer (SqlStore.watch)

    def _trace(self, statement: str) -> None:
        for watch in self.watchers:
            watch(statement)

    def traced(self, conn: AsyncConnection) -> None:
        """sqlite3's own trace on `conn` while anyone watches, none otherwise: it sees SQLAlchemy's
        statements and the driver SQL of storage/sqlite/fast.py alike."""
        sqlite_driver.sqlite3_of(sqlite_driver.aio(conn)).set_trace_callback(self._trace if self.watchers else None)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection]:
        """The writer connection, this unit's alone until the block ends."""
        # One turn of the loop first: the statements run on the loop (storage/sqlite/driver.py) and an
        # uncontended lock does not yield, so a task writing unit after unit would starve every other
        # task (the pool checkout this replaces yielded).
        await asyncio.sleep(0)
        async with self.lock:
            conn = self._conn
            if conn is None or conn.closed or conn.invalidated:
                conn = self._conn = await self.engine.connect()
            self.traced(conn)  # as the watchers are now (a C call: cheaper than tracking when they change)
            try:
                yield conn
            finally:
                if conn.in_transaction() or conn.invalidated:
                    self._conn = None
                    await asyncio.shield(conn.close())

    async def close(self) -> None:
        async with self.lock:
            if self._conn is not None:
                conn, self._conn = self._conn, None
                await conn.close()
