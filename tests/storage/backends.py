"""Every storage backend under contract, one entry each: a new backend plugs in by adding one here.

A backend is opened per test on that test's own empty, migrated database. `open_store` and
`open_run_store` may be called more than once: each call is another handle on the *same* data (as
another process would hold), so the contract suites can race two "processes" against each other.
This module is also the one place the contract suites import the run store's interface from.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from storage.base import Store
from storage.run_store import RunStore, RunUnit, SqlRunStore
from storage.sql import SqlStore
from storage.stores import open_store

__all__ = ["BACKENDS", "Backend", "Closer", "RunStore", "RunUnit", "Store"]

Closer = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Backend:
    """How to open one backend's stores on one test's data."""

    open_store: Callable[[], Awaitable[Store]]
    # A run store has no close() of its own: the callable that frees it comes with it.
    open_run_store: Callable[[], Awaitable[tuple[RunStore, Closer]]]


def sql_backend(request: pytest.FixtureRequest) -> Backend:
    """SqlStore / SqlRunStore on the engine `db_url` gives (SQLite, or PostgreSQL when configured)."""
    db_url: str = request.getfixturevalue("db_url")

    async def open_sql_store() -> Store:
        return await open_store(db_url)

    async def open_run_store() -> tuple[RunStore, Closer]:
        store = await open_store(db_url)
        return SqlRunStore(store), store.close

    return Backend(open_sql_store, open_run_store)


BACKENDS: dict[str, Callable[[pytest.FixtureRequest], Backend]] = {"sql": sql_backend}
