"""What storage relies on inside aiosqlite, SQLAlchemy and asyncpg is there in the installed versions.

storage/sqlite/driver.py and storage/postgres/driver.py are the only modules that reach into those
libraries' internals; each lists what it uses. When an upgrade removes one of them, these tests
name it (and a server refuses to open its database, naming it), instead of a request failing later.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from storage.postgres import driver as pg_driver
from storage.sqlite import driver as sqlite_driver
from storage.sqlite.driver import inline_creator


def test_aiosqlite_has_what_the_sqlite_driver_module_uses(tmp_path: Path) -> None:
    conn = inline_creator(str(tmp_path / "x.db"))()
    assert sqlite_driver.missing(conn) == []
    asyncio.run(_open_and_close(conn))


async def _open_and_close(conn: object) -> None:
    opened = await conn  # type: ignore[misc]
    assert isinstance(sqlite_driver.sqlite3_of(opened), sqlite3.Connection)
    cursor = await sqlite_driver.execute(opened, "SELECT 41 + 1")
    assert cursor.fetchone() == (42,)
    await opened.close()


def test_a_missing_attribute_is_named_and_the_database_is_not_opened(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_driver, "INSTANCE_RELIED_ON", ("_connection", "_gone_in_a_new_version"))
    assert sqlite_driver.missing(object()) == ["aiosqlite.Connection()._connection",
                                               "aiosqlite.Connection()._gone_in_a_new_version"]
    with pytest.raises(RuntimeError, match=r"_gone_in_a_new_version.*pyproject.toml"):
        inline_creator(str(tmp_path / "x.db"))()


def test_sqlalchemys_asyncpg_dialect_has_what_the_pg_driver_module_uses() -> None:
    engine = create_async_engine("postgresql+asyncpg://u:p@127.0.0.1:1/db")  # never connects
    try:
        assert pg_driver.missing(engine.dialect) == []
        assert pg_driver.connect_args(engine)["host"] == "127.0.0.1"
        pg_driver.codecs(engine)  # refuses, naming what is missing, when anything is
    finally:
        asyncio.run(engine.dispose())


def test_a_dialect_without_the_codec_set_up_is_refused_by_name() -> None:
    engine = create_async_engine("postgresql+asyncpg://u:p@127.0.0.1:1/db")
    try:
        bare = SimpleNamespace(create_connect_args=engine.dialect.create_connect_args)
        assert pg_driver.missing(bare) == [f"SimpleNamespace.{name}" for name in pg_driver.RELIED_ON[1:]]
    finally:
        asyncio.run(engine.dispose())
