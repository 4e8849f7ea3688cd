"""PostgreSQL: the request read as driver SQL on asyncpg's own pool (storage/postgres/raw.py).

A read through SQLAlchemy Core cost about 0.5 ms of CPU (execution context, result set-up, the
adapter's cursor, a greenlet for each of checkout, statement and check-in) against 0.15-0.25 ms for
asyncpg's own `fetchrow` of the same prepared statement and the row's mapping, and every click,
card delivery and long-poll reads its request.

Invariants:
- The same Request as SQLAlchemy's read (storage/rows.RequestRead: the same SQL, each column's own
  result processor over the values asyncpg decodes with the codecs SQLAlchemy sets on its
  connections, which pg_raw sets on its own; tests/storage/test_sqlite_fast.py compares them).
- A refused read runs again through SQLAlchemy as driver SQL (the same raw values), which raises
  what it always raised or answers; a lost connection is pg_raw's DBAPIError.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncEngine

from bot.domain.model import Request
from storage.rows import request_read

if TYPE_CHECKING:
    from storage.postgres.raw import RawPool


async def get_request(raw: RawPool, engine: AsyncEngine, request_id: str) -> Request | None:
    """`engine`: the AUTOCOMMIT engine (no transaction around the read, as on `raw`)."""
    read = request_read(engine.dialect)

    async def through_sqlalchemy() -> Any:
        rows = await driver_rows(engine, read.sql, (request_id,))
        return rows[0] if rows else None

    row = await raw.fetchrow(read.sql, (request_id,), through_sqlalchemy)
    return read.request(tuple(row)) if row is not None else None


async def driver_rows(engine: AsyncEngine, sql: str, params: Sequence[Any]) -> Sequence[Any]:
    """`sql`'s rows through SQLAlchemy on `engine` (AUTOCOMMIT), as the driver returns them: the second
    run of a statement the raw pool's server refused."""
    async with engine.connect() as conn:
        return (await conn.exec_driver_sql(sql, tuple(params))).all()
