"""After the database drops the server's connections (a restart, a failover), the store recovers by
itself: at most one call fails, and every call after it works, with no pre-ping per checkout.

On PostgreSQL the test terminates the store's backends (exactly one call then fails, measured);
SQLite has no server to restart, so there the same calls must simply all work.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from storage.sql import SqlStore
from tests.conftest import PG_URL, _pg_admin


async def test_the_store_recovers_after_the_database_drops_its_connections(db_url: str) -> None:
    store = await SqlStore.open(db_url)
    try:
        assert await store.get_request("apr_missing") is None  # the pool now holds a live connection
        if PG_URL:
            name = sa.engine.make_url(db_url).database
            await _pg_admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")
        failures = 0
        for _ in range(3):
            try:
                assert await store.get_request("apr_missing") is None
            except DBAPIError as exc:
                assert exc.connection_invalidated
                failures += 1
        assert failures <= 1
        assert await store.get_request("apr_missing") is None
        async with store.unit() as unit:  # writes work again too
            assert await unit.get_request("apr_missing") is None
    finally:
        await store.close()
