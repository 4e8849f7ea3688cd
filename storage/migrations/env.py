"""Alembic environment.

`storage.migrate.upgrade()` hands us a synchronous connection (from an async engine's
`run_sync`) in `config.attributes["connection"]`; plain `alembic` CLI use opens its own.
"""

from __future__ import annotations

import asyncio
from typing import Any

from alembic import context
from sqlalchemy.ext.asyncio import create_async_engine

import storage.grants_schema  # noqa: F401  (registers the grant and delegation tables)
import storage.runs_schema  # noqa: F401  (registers the run tables on the shared metadata)
from storage.schema import metadata

config = context.config


def _run(connection: Any) -> None:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


async def _standalone() -> None:
    engine = create_async_engine(config.get_main_option("sqlalchemy.url") or "")
    async with engine.begin() as conn:
        await conn.run_sync(_run)
    await engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run `signoff db upgrade`")
elif config.attributes.get("connection") is not None:
    _run(config.attributes["connection"])
else:
    asyncio.run(_standalone())
