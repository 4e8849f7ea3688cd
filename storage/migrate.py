"""Schema migrations (Alembic), run on an async engine.

Alembic itself is imported only to migrate: every `signoff serve` start asks whether the schema is
current, and that question needs no Alembic. The newest revision is `HEAD` (a new migration moves it:
tests/storage/test_schema.py holds it to Alembic's own reading of migrations/versions/), and the
database's is the one row of `alembic_version`. Loading Alembic and its 20 migration scripts took about
a tenth of each start.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from storage.sqlite.engine import sqlite_engine
from storage.urls import async_url

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"
HEAD = "0020_history"  # the newest migration's `revision`


def alembic_config(url: str | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if url:
        cfg.set_main_option("sqlalchemy.url", url)
    return cfg


async def upgrade(database_url: str, revision: str = "head", *, engine: AsyncEngine | None = None) -> None:
    """Bring the database to `revision`. Safe to run on every start and from several processes."""
    own = engine is None
    if engine is None:
        url = async_url(database_url)
        engine = sqlite_engine(database_url) if url.get_backend_name() == "sqlite" else create_async_engine(url)
    from alembic import command

    cfg = alembic_config()

    def _upgrade(sync_conn: Any) -> None:
        cfg.attributes["connection"] = sync_conn
        command.upgrade(cfg, revision)

    try:
        async with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                # Two replicas starting at once must not migrate at the same time.
                await conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7405313)")
            await conn.run_sync(_upgrade)
    finally:
        if own:
            await engine.dispose()


async def current_revision(engine: AsyncEngine) -> str | None:
    """The database's schema revision: None for a database Alembic never migrated."""
    async with engine.connect() as conn:
        if not await conn.run_sync(lambda c: sa.inspect(c).has_table("alembic_version")):
            return None
        return (await conn.execute(sa.text("SELECT version_num FROM alembic_version"))).scalar()


def head_revision() -> str:
    """The newest migration's revision (the module docstring says why not Alembic's reading)."""
    return HEAD


def alembic_head() -> str | None:
    """Alembic's own reading of the newest revision (for the test that holds head_revision to it)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()
