"""Schema migrations (Alembic), run on an async engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from storage.sqlite.engine import sqlite_engine
from storage.urls import async_url

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(url: str | None = None) -> Config:
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
    async with engine.connect() as conn:
        return await conn.run_sync(lambda c: MigrationContext.configure(c).get_current_revision())


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()
