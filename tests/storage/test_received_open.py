"""`ReceivedStore.open_for`: whether a stored Slack input not yet handled names a request (the timer
sweep leaves that request's timeout until the input is handled). One statement for every call, so the
process's own handled-but-unmarked rows are skipped after the read, not in it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from storage.received import Received, ReceivedStore
from storage.sql import SqlStore
from storage.stores import open_store

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def click(key: str, request_id: str) -> Received:
    return Received(key, f'payload={{"actions":[{{"value":"{request_id}"}}]}}', "application/x-www-form-urlencoded")


async def test_open_inputs_are_found_past_the_processes_own_handled_rows_and_ids_match_literally(db_url: str) -> None:
    store = await open_store(db_url)
    assert isinstance(store, SqlStore)
    rows = ReceivedStore(store, lambda: NOW, timedelta(seconds=30))
    try:
        handled = [click(f"k{n}", "req_a1") for n in range(3)]
        for item in handled:
            assert await rows.add(item)
        for item in handled:
            assert item.id is not None
            rows.done_later(item.id)  # handled here, the marks not written yet
        assert not await rows.open_for("req_a1")  # every stored input for it is handled
        later = click("k9", "req_a1")
        assert await rows.add(later)  # its transaction also writes the three marks
        assert await rows.open_for("req_a1")
        assert not await rows.open_for("reqXa1")  # `_` is not a wildcard
        assert not await rows.open_for("req%")  # nor is `%`
        assert later.id is not None
        rows.done_later(later.id)
        assert not await rows.open_for("req_a1")
    finally:
        await store.close()
