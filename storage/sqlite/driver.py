"""Every reach into aiosqlite's and SQLAlchemy's SQLite adapter's internals, in one place.

Nothing else in Signoff touches a private attribute of these libraries: the rest of storage calls
`aio`, `sqlite3_of` and `execute` here. `RELIED_ON` lists what this module uses that the libraries do
not promise; `missing()` checks it (tests/storage/test_driver_internals.py, and every SQLite engine
at creation), so an upgrade that removes one fails loudly at start-up, naming it, instead of deep in
a request. pyproject.toml bounds aiosqlite and SQLAlchemy below their next major versions.

SQLite statements run on the event loop's thread, falling back to aiosqlite's thread only to wait.

aiosqlite runs every statement on a worker thread: a queue put, a thread wake-up, a GIL hand-off
and a `call_soon_threadsafe` back, for statements that themselves take microseconds (a WAL-mode
SQLite file on local disk, `synchronous=NORMAL`: a commit writes the WAL without an fsync). That
hand-off was 40-70 % of the server's busy samples under load (`python -m bench.all --profile`).

`InlineConnection` keeps aiosqlite's interface (SQLAlchemy's `sqlite+aiosqlite` dialect drives it
unchanged) but runs each call directly, with the connection's busy timeout at 0, so a call never
blocks the loop waiting for a lock. The only waits SQLite has are for locks held by another
process (a second replica's write transaction, a checkpoint): such a call fails at once with
SQLITE_BUSY, having done nothing, and is run again on aiosqlite's thread with the full
`BUSY_TIMEOUT_MS`, exactly as before. So the event loop runs statements (never waits on another
process), and a contended file behaves as it did.

Invariant: one connection is used by one coroutine at a time (SQLAlchemy's pool checks it out),
so the loop's thread and the worker thread never use it at once; `check_same_thread=False` lets
both use it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Any

import aiosqlite
from sqlalchemy.ext.asyncio import AsyncConnection

BUSY_TIMEOUT_MS = 30_000

# What this module relies on that aiosqlite does not promise (checked by `missing`).
RELIED_ON: tuple[tuple[object, str, str], ...] = (
    (aiosqlite.Connection, "_execute", "runs a call on the connection (inline here, else its thread)"),
    (aiosqlite.Connection, "stop", "stops the worker thread"),
    (aiosqlite.core, "_STOP_RUNNING_SENTINEL", "ends aiosqlite's worker thread"),
)
# Instance attributes aiosqlite sets in Connection.__init__ (checked on a live connection).
INSTANCE_RELIED_ON = ("_connection", "_running", "_tx", "_thread")


def missing(connection: object | None = None) -> list[str]:
    """What of RELIED_ON (and, given a live aiosqlite connection, INSTANCE_RELIED_ON) this install lacks."""
    gone = [f"{getattr(owner, '__name__', owner)}.{name} ({why})" for owner, name, why in RELIED_ON
            if not hasattr(owner, name)]
    if connection is not None:
        gone += [f"aiosqlite.Connection().{name}" for name in INSTANCE_RELIED_ON if not hasattr(connection, name)]
    return gone


def aio(conn: AsyncConnection) -> Any:
    """The aiosqlite connection (an InlineConnection) under a SQLAlchemy AsyncConnection."""
    return conn.sync_connection.connection.driver_connection  # type: ignore[union-attr]


def sqlite3_of(driver: Any) -> sqlite3.Connection:
    """The sqlite3 connection under an aiosqlite one."""
    conn: sqlite3.Connection = driver._connection
    return conn


def execute(driver: Any, sql: str, params: Any = ()) -> Any:
    """`sql` on an aiosqlite connection's own sqlite3 connection, as aiosqlite runs a call (inline
    here, on its thread only to wait for another process's lock): an awaitable of the cursor."""
    return driver._execute(driver._connection.execute, sql, params)


def busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:  # pragma: no cover - Python < 3.11 has no error codes
        return "locked" in str(exc)
    return bool(code & 0xFF == sqlite3.SQLITE_BUSY)


class InlineConnection(aiosqlite.Connection):
    """aiosqlite.Connection whose calls run on the caller's thread unless they must wait for a lock."""

    async def _execute(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if not self._running or not self._connection:
            raise ValueError("Connection closed")
        try:
            return fn(*args, **kwargs)
        except sqlite3.OperationalError as exc:
            if not busy(exc):
                raise
        # Another process holds the lock: wait for it on the worker thread, not on the event loop.
        return await super()._execute(_patiently, self._connection, fn, args, kwargs)  # type: ignore[no-untyped-call]

    def stop(self) -> asyncio.Future[Any] | None:
        """Stop the worker thread; a future only when a loop runs to receive it.

        aiosqlite's `__del__` (a connection nobody closed, collected later) calls this outside any
        running loop, and its own version takes `asyncio.get_event_loop()`'s future, perhaps of a
        loop that has closed: the worker thread then dies on `call_soon_threadsafe` after closing
        the file, an unhandled exception in a thread. Without a running loop nobody awaits the
        future, so none is made."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._running = False
            self._tx.put_nowait((None, self._close_and_stop))
            return None
        future: asyncio.Future[Any] | None = super().stop()
        return future

    def _close_and_stop(self) -> object:
        """On the worker thread: aiosqlite's own last call (close the file, end the thread's loop)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        return _STOP


_STOP: object = aiosqlite.core._STOP_RUNNING_SENTINEL  # ends aiosqlite's worker thread (>= 0.22, as `_thread`)


def _patiently(conn: sqlite3.Connection, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    try:
        return fn(*args, **kwargs)
    finally:
        conn.execute("PRAGMA busy_timeout=0")


def inline_creator(filename: str, **kwargs: Any) -> Callable[[], InlineConnection]:
    """An `async_creator` for `create_async_engine`: a connection to `filename` with busy timeout 0."""
    options = {**kwargs, "timeout": 0, "check_same_thread": False}

    def connector() -> sqlite3.Connection:
        conn: sqlite3.Connection = sqlite3.connect(filename, **options)
        return conn

    def create() -> InlineConnection:
        conn = InlineConnection(connector, 64)
        gone = missing(conn)
        if gone:
            raise RuntimeError("this aiosqlite lacks what storage/sqlite/driver.py relies on: " + ", ".join(gone)
                               + "; install the versions pyproject.toml allows")
        conn._thread.daemon = True  # as SQLAlchemy's dialect does for aiosqlite's own connections
        return conn

    return create
