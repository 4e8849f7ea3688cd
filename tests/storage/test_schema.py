"""The SQL backend's schema: Alembic owns it, and the migrated schema is exactly `storage/schema.py`.

The `db_url` fixture's template is migrated, never `create_all`, so a missing migration fails here.
SQLite by default; PostgreSQL when SIGNOFF_TEST_DATABASE_URL is set.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import pkgutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

import storage
from storage.migrate import current_revision, head_revision
from storage.schema import metadata
from storage.sql import SqlStore
from tests.conftest import PG_URL, _pg_admin, _pg_url_for
from tests.harness import ROOT
from tests.storage.test_contract import full_request, insert


@pytest_asyncio.fixture
async def sql_store(db_url: str) -> AsyncIterator[SqlStore]:
    store = await SqlStore.open(db_url)
    try:
        yield store
    finally:
        await store.close()



def full_metadata() -> sa.MetaData:
    """storage/schema.py's metadata, with every storage module that adds tables to it loaded."""
    for module in pkgutil.iter_modules(storage.__path__):
        if module.name != "migrations":
            importlib.import_module(f"storage.{module.name}")
    return metadata


async def schema_diff(store: SqlStore) -> list[Any]:
    target = full_metadata()
    async with store.engine.connect() as conn:
        return await conn.run_sync(lambda c: compare_metadata(MigrationContext.configure(c), target))


async def test_migrated_schema_matches_schema_py(sql_store: SqlStore) -> None:
    diff = await schema_diff(sql_store)
    assert diff == [], "the table definitions and the Alembic migrations disagree (a migration is missing?)"
    assert await current_revision(sql_store.engine) == head_revision()


@pytest_asyncio.fixture
async def empty_db_url(tmp_path: Path) -> AsyncIterator[str]:
    """A database with no tables at all, on the engine under test."""
    if not PG_URL:
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    name = f"signoff_e_{uuid.uuid4().hex[:12]}"
    await _pg_admin(f'CREATE DATABASE "{name}"')
    try:
        yield _pg_url_for(name)
    finally:
        await _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def signoff_db_upgrade(database_url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "DATABASE_URL": database_url}
    return subprocess.run([sys.executable, "-m", "bot", "db", "upgrade"], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


async def test_signoff_db_upgrade_twice_is_idempotent(empty_db_url: str, tmp_path: Path) -> None:
    first = await asyncio.to_thread(signoff_db_upgrade, empty_db_url, tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.endswith(f" created at {head_revision()}\n")  # it says what it did
    store = await SqlStore.open(empty_db_url)
    try:
        request = full_request()
        await insert(store, request)
        second = await asyncio.to_thread(signoff_db_upgrade, empty_db_url, tmp_path)
        assert second.returncode == 0, second.stderr
        assert second.stdout.endswith(f" is already at {head_revision()}; nothing to do\n")
        assert await store.get_request(request.id) == request  # nothing was rebuilt
        assert await current_revision(store.engine) == head_revision()
        assert await schema_diff(store) == []
    finally:
        await store.close()



