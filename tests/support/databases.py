"""The test database's engine, from SIGNOFF_TEST_DATABASE_URL (unset: SQLite files; a postgresql://
URL: that server), and PostgreSQL's admin side: run a statement, name a database, make an empty one."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any
from contextlib import asynccontextmanager

from sqlalchemy.engine import make_url

PG_URL = os.environ.get("SIGNOFF_TEST_DATABASE_URL", "").strip()
ENGINE = "postgresql" if PG_URL else "sqlite"


async def _pg_connect(name: str) -> Any:
    """A connection to database `name` on the test server, as the test's URL says."""
    import asyncpg

    url = make_url(PG_URL.replace("postgres://", "postgresql://", 1))
    return await asyncpg.connect(host=url.host, port=url.port or 5432, user=url.username, password=url.password,
                                 database=name)


async def pg_admin(sql: str) -> None:
    conn = await _pg_connect("postgres")
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


# What a test could change about a database besides its rows: relations and their columns (any schema
# but the system's), triggers, functions, and the migration it is at. Equal to the template's: only
# rows to take away.
_SHAPE = """
SELECT md5(coalesce(string_agg(x, '|' ORDER BY x), '')) FROM (
  SELECT n.nspname || '.' || c.relname || ':' || c.relkind::text || ':' || coalesce((
      SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull, ','
                        ORDER BY a.attnum)
      FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '') AS x
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
  UNION ALL SELECT 'trigger:' || tgrelid::regclass::text || ':' || tgname FROM pg_trigger WHERE NOT tgisinternal
  UNION ALL SELECT 'function:' || p.proname || ':' || md5(p.prosrc)
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
  UNION ALL SELECT 'revision:' || version_num FROM alembic_version
) shape
"""


class PgReset:
    """Puts a used clone of `template` back into the template's state, rows only, or says it cannot.

    A clone costs PostgreSQL a CREATE DATABASE (it copies the catalogs through the WAL: about 0.25 s of
    its CPU here, and 8 MB of WAL) and a DROP; a test leaves a few rows. So a clone whose shape (tables,
    columns, triggers, functions, revision) is still the template's gets its rows deleted, the
    template's own rows (written by the migrations) put back and its sequences set back, in one
    transaction (about 15 ms), and serves the next test. Anything else (a changed shape, many rows, an
    error) and it is dropped as before.
    """

    MAX_ROWS = 2_000  # more left behind: dropped (a table that big would carry its bloat to the next test)

    def __init__(self, template: str) -> None:
        self.template = template
        self.shape = ""
        self.tables: list[str] = []
        self.seeded: dict[str, tuple[list[str], list[tuple[object, ...]]]] = {}
        self.sequences: list[tuple[str, int, int | None]] = []

    async def read_template(self) -> None:
        conn = await _pg_connect(self.template)
        try:
            self.shape = await conn.fetchval(_SHAPE)
            self.tables = [r[0] for r in await conn.fetch(
                "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables "
                "WHERE schemaname NOT IN ('pg_catalog', 'information_schema') AND tablename <> 'alembic_version' "
                "ORDER BY 1")]
            for table in self.tables:
                rows = await conn.fetch(f"SELECT * FROM {table}")
                if rows:
                    self.seeded[table] = (list(rows[0].keys()), [tuple(r.values()) for r in rows])
            self.sequences = [(r[0], r[1], r[2]) for r in await conn.fetch(
                "SELECT format('%I.%I', schemaname, sequencename), start_value, last_value FROM pg_sequences")]
        finally:
            await conn.close()

    async def reset(self, name: str) -> bool:
        """`name` holds the template's rows again (True), or was left as it was (False: drop it)."""
        conn = await _pg_connect(name)
        try:
            # Still connected from its test (a pool left open, a killed server's backend not gone yet):
            # dropped, as before, and not waited for. Ending those connections here, right before the next
            # test, put their "connection lost" errors into that test's log.
            others = await conn.fetchval("SELECT count(*) FROM pg_stat_activity "
                                         "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            if others or await conn.fetchval(_SHAPE) != self.shape:
                return False
            async with conn.transaction():
                await conn.execute("SET LOCAL lock_timeout = '5s'; SET LOCAL session_replication_role = replica")
                deleted = 0
                for table in self.tables:
                    deleted += int((await conn.execute(f"DELETE FROM {table}")).split()[-1])
                if deleted > self.MAX_ROWS:
                    raise _TooMany
                for table, (columns, rows) in self.seeded.items():
                    schema, _, bare = table.partition(".")
                    await conn.copy_records_to_table(bare.strip('"'), records=rows, columns=columns,
                                                     schema_name=schema.strip('"'))
                for sequence, start, last in self.sequences:
                    await conn.execute("SELECT setval($1::regclass, $2, $3)", sequence,
                                       start if last is None else last, last is not None)
            return True
        except _TooMany:
            return False
        finally:
            await conn.close()


class _TooMany(Exception):
    pass

