"""Every reach into SQLAlchemy's asyncpg dialect internals, in one place.

storage/postgres/raw.py opens asyncpg's own pool with the connections SQLAlchemy would open: the dialect's
connect arguments and its json/jsonb (and inet) codecs. The dialect's codec set-up is not a public
API: `RELIED_ON` lists what is used, and `missing()` checks it (tests/storage/test_driver_internals.py,
and every raw pool at opening), so an upgrade that removes one fails loudly at start-up, naming it.
pyproject.toml bounds SQLAlchemy and asyncpg below their next major versions.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import asyncpg
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

RELIED_ON = ("create_connect_args", "setup_asyncpg_json_codec", "setup_asyncpg_jsonb_codec",
             "_native_inet_types", "_disable_asyncpg_inet_codecs")


def missing(dialect: Any) -> list[str]:
    """What of RELIED_ON this SQLAlchemy's asyncpg dialect lacks, and whether asyncpg's pool still
    takes `reset=` (storage/postgres/raw.py's connections skip the reset round trip)."""
    gone = [f"{type(dialect).__name__}.{name}" for name in RELIED_ON if not hasattr(dialect, name)]
    if "reset" not in inspect.signature(asyncpg.create_pool).parameters:
        gone.append("asyncpg.create_pool(reset=...)")
    return gone


def connect_args(engine: AsyncEngine) -> dict[str, Any]:
    """asyncpg.connect's arguments for the connections `engine` opens."""
    url: URL = engine.url
    _, params = engine.dialect.create_connect_args(url)
    for key in ("prepared_statement_name_func", "async_creator_fn"):
        params.pop(key, None)  # SQLAlchemy's adapter's own options, not asyncpg.connect's
    if "prepared_statement_cache_size" in params:  # e.g. 0 behind pgbouncer: asyncpg's own cache likewise
        params["statement_cache_size"] = params.pop("prepared_statement_cache_size")
    return dict(params)


def codecs(engine: AsyncEngine) -> Callable[[asyncpg.Connection], Awaitable[None]]:
    """A pool's `init`: the codecs SQLAlchemy's dialect sets on each connection it opens."""
    dialect: Any = engine.dialect
    gone = missing(dialect)
    if gone:
        raise RuntimeError("this SQLAlchemy/asyncpg lacks what storage/postgres/driver.py relies on: " + ", ".join(gone)
                           + "; install the versions pyproject.toml allows")

    async def init(conn: asyncpg.Connection) -> None:
        adapted = SimpleNamespace(_connection=conn)  # what the dialect's codec set-up reads
        await dialect.setup_asyncpg_json_codec(adapted)
        await dialect.setup_asyncpg_jsonb_codec(adapted)
        if dialect._native_inet_types is False:
            await dialect._disable_asyncpg_inet_codecs(adapted)

    return init
