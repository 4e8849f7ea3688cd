"""PostgreSQL: the request read as driver SQL on the asyncpg connection SQLAlchemy checked out.

A read through SQLAlchemy Core cost about 0.5 ms of CPU (execution context, result set-up, the
adapter's cursor) against 0.15-0.25 ms for asyncpg's own `fetchrow` of the same prepared statement
and the row's mapping (in-process, 300 reads on loopback), and every click, card delivery and
long-poll reads its request. Only on a connection of the AUTOCOMMIT reader engine: there no
transaction is open for SQLAlchemy to track, so asyncpg's statement is one of its own.

Invariants:
- The same Request as SQLAlchemy's read (storage/rows.RequestRead: the same SQL, each column's own
  result processor over the values asyncpg decodes with the codecs SQLAlchemy set on the connection;
  tests/storage/test_sqlite_fast.py compares them).
- A failure is SQLAlchemy's: the read runs again through SQLAlchemy on the same connection, which
  raises what it always raised (a dropped connection invalidates the pool, tests/storage/test_reconnect.py)
  or, after a transient driver error such as a stale prepared statement, answers.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.model import Request
from storage.rows import REQUEST_BY_ID, request_from_row, request_read


async def get_request(conn: AsyncConnection, request_id: str) -> Request | None:
    """`conn`: checked out of the AUTOCOMMIT engine, with no transaction begun."""
    read = request_read(conn.dialect)
    driver: Any = conn.sync_connection.connection.driver_connection  # type: ignore[union-attr]
    try:
        row = await driver.fetchrow(read.sql, request_id)
    except Exception:  # noqa: BLE001 - answered or raised as SQLAlchemy does, below
        found = (await conn.execute(REQUEST_BY_ID, {"request_id": request_id})).first()
        return request_from_row(found) if found is not None else None
    return read.request(tuple(row)) if row is not None else None
