"""SQLite engines for the store: WAL mode, statements on the event loop's thread, one writer."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from bot.domain.json_codec import loads
from storage.sqlite_inline import inline_creator
from storage.urls import async_url


def sqlite_engine(database_url: str, *, begin: str | None = "BEGIN IMMEDIATE") -> AsyncEngine:
    """An engine on a SQLite file in WAL mode; `begin` is the statement that opens a transaction.

    Statements run on the event loop's thread (storage/sqlite_inline.py): only a wait for another
    process's lock goes to aiosqlite's worker thread.
    """
    url = async_url(database_url)
    (filename,), options = SQLiteDialect_aiosqlite().create_connect_args(url)
    kwargs: dict[str, Any] = {"async_creator": inline_creator(filename, **options), "json_deserializer": loads}
    if begin is not None:
        kwargs.update(pool_size=1, max_overflow=0)  # the writer: one connection, SQLite allows one writer
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
        # run again, with the full timeout, on the connection's worker thread (storage/sqlite_inline.py).
        cursor.execute("PRAGMA busy_timeout=0")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    if begin is not None:

        @event.listens_for(engine.sync_engine, "begin")
        def _begin(conn: Any) -> None:
            conn.exec_driver_sql(begin)
