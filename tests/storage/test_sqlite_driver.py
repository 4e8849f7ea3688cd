"""SQLite statements run on the event loop, but a wait for another process's lock never blocks it.

storage/sqlite/driver.py runs statements inline with a busy timeout of 0; a statement that meets a
lock held elsewhere (here: another connection's write transaction, as a second replica would hold)
must wait for it on aiosqlite's worker thread, with the event loop free meanwhile, and then succeed.
"""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
import pytest_asyncio
import sqlalchemy as sa

from bot.domain.model import AuditEvent
from storage.schema import audit_events
from storage.migrate import upgrade
from storage.sqlite import fast as sqlite_fast
from storage.sql import SqlStore
from storage.stores import open_store
from tests.storage.test_contract import make_request


@pytest_asyncio.fixture
async def sqlite_file(tmp_path: Path) -> str:
    """A migrated SQLite file, whichever engine the suite runs on (this is SQLite's driver)."""
    path = tmp_path / "inline.db"
    await upgrade(f"sqlite:///{path}")
    return str(path)


async def test_a_write_waits_for_another_process_lock_off_the_loop(sqlite_file: str) -> None:
    store = await open_store(f"sqlite:///{sqlite_file}")
    other = sqlite3.connect(sqlite_file, isolation_level=None)
    try:
        async with store.unit() as unit:  # the writer connection exists and is warm
            await unit.append_audit(AuditEvent("apr_warm", "created", _now(), None, {}))
        other.execute("BEGIN IMMEDIATE")  # another process holds SQLite's write lock

        async def write() -> None:
            async with store.unit() as unit:
                await unit.append_audit(AuditEvent("apr_waited", "created", _now(), None, {}))

        writing = asyncio.create_task(write())
        for _ in range(50):  # the loop keeps turning while the write waits for the lock
            await asyncio.sleep(0)
        assert not writing.done()
        other.execute("COMMIT")
        await writing
        async with store.engine.connect() as conn:
            found = (await conn.execute(sa.select(audit_events.c.request_id)
                                        .where(audit_events.c.request_id == "apr_waited"))).scalars().all()
        assert found == ["apr_waited"]
    finally:
        other.close()
        await store.close()


async def test_reads_run_while_another_process_writes(sqlite_file: str) -> None:
    store = await open_store(f"sqlite:///{sqlite_file}")
    other = sqlite3.connect(sqlite_file, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO audit_events (request_id, type, at, data) VALUES ('apr_x', 'created', "
                      "'2026-01-01T00:00:00+00:00', '{}')")
        assert await store.get_request("apr_missing") is None  # WAL: a reader never waits for a writer
        assert await store.audit_events("apr_x") == []  # and does not see its uncommitted row
        other.execute("COMMIT")
        assert [e.type for e in await store.audit_events("apr_x")] == ["created"]
    finally:
        other.close()
        await store.close()


async def test_a_request_read_that_meets_a_lock_reads_through_the_pool(sqlite_file: str, tmp_path: Path) -> None:
    """The request read runs on a connection of its own and never waits (storage/sqlite_fast.Reader).
    When SQLite answers it SQLITE_BUSY (here: its file is held exclusively by another connection, as
    during another process's WAL recovery), the store reads through its pool instead."""
    store = await open_store(f"sqlite:///{sqlite_file}")
    locked_path = tmp_path / "locked.db"
    locked_path.write_bytes(Path(sqlite_file).read_bytes())
    holder = sqlite3.connect(locked_path, isolation_level=None)
    try:
        request = make_request("apr_locked_0001")
        async with store.unit() as unit:
            await unit.insert_request(request)
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")  # every other connection to locked.db gets SQLITE_BUSY
        store._reader = sqlite_fast.Reader(str(locked_path), store.engine.dialect)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            store._reader.get_request(request.id)  # what the store meets
        assert await store.get_request(request.id) == request  # and reads through the pool instead
    finally:
        holder.close()
        await store.close()


def _now() -> datetime:
    return datetime.now(UTC)


def test_a_connection_dropped_after_its_loop_closed_stops_its_thread_quietly(sqlite_file: str) -> None:
    """A connection nobody closed (a test's or a cancelled task's) is collected after its event loop
    closed: aiosqlite's own `__del__` would hand its worker thread a future of that closed loop, and the
    thread would die on `call_soon_threadsafe` ("Event loop is closed"), an unhandled thread exception
    that surfaces in whichever test runs next. The thread must stop cleanly and close the file."""
    import gc
    import threading
    import warnings

    from storage.sqlite.driver import inline_creator

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    conn = loop.run_until_complete(inline_creator(sqlite_file)())
    raw, thread = conn._connection, conn._thread
    loop.close()  # the loop ends; asyncio.get_event_loop() still returns it, closed

    died: list[threading.ExceptHookArgs] = []
    hook, threading.excepthook = threading.excepthook, died.append
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)  # aiosqlite's "deleted before being closed"
            del conn
            gc.collect()
        thread.join(5)
    finally:
        threading.excepthook = hook
        asyncio.set_event_loop(None)
    assert not thread.is_alive()
    assert died == []
    with pytest.raises(sqlite3.ProgrammingError):  # closed
        raw.execute("SELECT 1")
