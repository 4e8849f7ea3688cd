"""Opening a store: the one place that chooses an engine's implementation for a database URL."""

from __future__ import annotations

from storage.sql import SqlStore
from storage.urls import async_url


async def open_store(database_url: str, *, pool_size: int = 15) -> SqlStore:
    """The store for `database_url`: SQLite's (storage/sqlite/store.py) or PostgreSQL's (storage/postgres/store.py)."""
    if async_url(database_url).get_backend_name() == "sqlite":
        from storage.sqlite.store import SqliteStore

        return await SqliteStore.connect(database_url)
    from storage.postgres.store import PostgresStore  # asyncpg: imported only where PostgreSQL is used

    return await PostgresStore.connect(database_url, pool_size=pool_size)
