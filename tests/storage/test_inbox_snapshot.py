"""A person's inbox (App Home, `/signoff pending`) is six reads (three pages and their totals) that
must agree: a request committed by another connection between a page and its total once showed as
"Waiting for you (1)" over an empty list ("… 1 more request"). Both engines read them in one snapshot."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any

from storage.sql import SqlStore
from storage.stores import open_store
from tests.storage.test_contract import T0
from tests.storage.test_pending_rows import pending, write


def commit_elsewhere(db_url: str, request_id: str) -> None:
    """A pending request for U1, committed by another store (its own connections, its own loop),
    while this thread waits: the inbox read is held exactly between two of its statements."""
    async def insert() -> None:
        other = await open_store(db_url)
        try:
            async with other.unit() as unit:
                await write(unit, *pending(request_id, None), generic=False)
        finally:
            await other.close()

    failed: list[BaseException] = []
    thread = threading.Thread(target=lambda: _run(insert, failed))
    thread.start()
    thread.join()
    assert not failed, failed


def _run(insert: Callable[[], Coroutine[Any, Any, None]], failed: list[BaseException]) -> None:
    try:
        asyncio.run(insert())
    except BaseException as exc:  # noqa: BLE001 - handed back to the test's thread
        failed.append(exc)


async def test_a_request_committed_between_a_page_and_its_total_is_in_neither(db_url: str) -> None:
    store = await open_store(db_url)
    assert isinstance(store, SqlStore)
    counted: list[str] = []

    def seen(sql: str) -> None:
        # Just before the inbox's first total is read (after its first page): another connection commits.
        if "count(" in sql.lower() and not counted:
            counted.append(sql)
            commit_elsewhere(db_url, "req_between")

    stop = store.watch(seen)
    try:
        inbox = await store.inbox("U1", limit=10, decided_since=T0 - timedelta(days=7))
    finally:
        stop()
    try:
        assert counted, "the inbox read no total: the test did not put the commit between the reads"
        assert (inbox.waiting_total, len(inbox.waiting)) == (0, 0)
        again = await store.inbox("U1", limit=10, decided_since=T0 - timedelta(days=7))
        assert again.waiting_total == 1 and [e.request.id for e in again.waiting] == ["req_between"]
    finally:
        await store.close()
