"""The test database's engine, from SIGNOFF_TEST_DATABASE_URL (unset: SQLite files; a postgresql://
URL: that server), and PostgreSQL's admin side: run a statement, name a database, make an empty one."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.engine import make_url

PG_URL = os.environ.get("SIGNOFF_TEST_DATABASE_URL", "").strip()
ENGINE = "postgresql" if PG_URL else "sqlite"


async def pg_admin(sql: str) -> None:
    import asyncpg

    url = make_url(PG_URL.replace("postgres://", "postgresql://", 1))
    conn = await asyncpg.connect(
        host=url.host, port=url.port or 5432, user=url.username, password=url.password, database="postgres"
    )
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def pg_url_for(name: str) -> str:
    url = make_url(PG_URL.replace("postgres://", "postgresql://", 1)).set(database=name)
    return url.render_as_string(hide_password=False)


def drop_database(name: str) -> None:
    """Drop a test database (WITH (FORCE): servers of its test may still be connected)."""
    asyncio.run(pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@asynccontextmanager
async def empty_pg_database(prefix: str) -> AsyncIterator[str]:
    """A PostgreSQL database of the test's own with no tables (its URL), dropped at the end."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    await pg_admin(f'CREATE DATABASE "{name}"')
    try:
        yield pg_url_for(name)
    finally:
        await pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
