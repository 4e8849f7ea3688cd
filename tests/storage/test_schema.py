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
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest_asyncio
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

import storage
from bot.domain.model import AuditEvent
from bot.domain.timing import Timing, initial_state
from bot.domain.outbox import OutboxItem
from storage.base import Reminded
from storage.migrate import alembic_head, current_revision, head_revision
from storage.schema import audit_events, metadata, outbox, requests
from storage.sql import SqlStore
from storage.stores import open_store
from tests.support.databases import PG_URL, empty_pg_database
from tests.support.app import ROOT
from tests.storage.test_contract import T0, full_request, insert, make_request


@pytest_asyncio.fixture
async def sql_store(db_url: str) -> AsyncIterator[SqlStore]:
    store = await open_store(db_url)
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


def test_the_head_serve_checks_without_alembic_is_alembics_head() -> None:
    """`signoff serve` compares the database with storage/migrate.HEAD, not Alembic's reading of the scripts
    (which it does not load): a new migration that does not move HEAD fails here."""
    assert head_revision() == alembic_head() is not None


@pytest_asyncio.fixture
async def empty_db_url(tmp_path: Path) -> AsyncIterator[str]:
    """A database with no tables at all, on the engine under test."""
    if not PG_URL:
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    async with empty_pg_database("signoff_e") as url:
        yield url


def signoff_db_upgrade(database_url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "DATABASE_URL": database_url}
    return subprocess.run([sys.executable, "-m", "bot", "db", "upgrade"], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


async def test_signoff_db_upgrade_twice_is_idempotent(empty_db_url: str, tmp_path: Path) -> None:
    first = await asyncio.to_thread(signoff_db_upgrade, empty_db_url, tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.endswith(f" created at {head_revision()}\n")  # it says what it did
    store = await open_store(empty_db_url)
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


async def test_the_sweeps_batched_reminder_write_stores_what_the_generic_write_stores(sql_store: SqlStore) -> None:
    """Times in the same stored form (SQLite compares them as text), JSON the same: only the write path differs."""
    timing = Timing(remind_every=timedelta(minutes=10), remind_max=3)
    now = T0.replace(microsecond=0) + timedelta(minutes=10)  # whole seconds: the form that differed
    batched, generic = (make_request(timing=timing, timers=initial_state(timing, T0), next_due_at=T0) for _ in "ab")
    await insert(sql_store, batched, generic)
    timers = initial_state(timing, T0).evolve(reminders_sent=1, remind_at=now + timedelta(minutes=10))

    def audit(rid: str) -> AuditEvent:
        return AuditEvent(rid, "reminded", now, None, {"number": 1, "of": 3})

    def item(rid: str) -> OutboxItem:
        return OutboxItem("slack.remind", f"remind:{rid}:1", {"number": 1, "of": 3}, rid, created_at=now,
                          next_attempt_at=now)

    async with sql_store.unit() as unit:
        assert await unit.write_reminders([Reminded(batched.id, 1, 1, timers.remind_at, timers.remind_at, now,
                                                    audit(batched.id), item(batched.id))]) == [batched.id]
        assert await unit.update_request(generic.evolve(timers=timers, next_due_at=timers.remind_at, updated_at=now),
                                         expected_version=1)
        await unit.append_audit(audit(generic.id))
        assert await unit.enqueue(item(generic.id))

    def raw(key: sa.Column[Any], *cols: sa.Column[Any]) -> Any:
        return sa.select(key, *(sa.cast(c, sa.Text) for c in cols)).order_by(key)

    async with sql_store.engine.connect() as conn:
        rows = (await conn.execute(raw(requests.c.id, requests.c.version, requests.c.reminders_sent,
                                       requests.c.remind_at, requests.c.next_due_at, requests.c.updated_at))).all()
        audits = (await conn.execute(raw(audit_events.c.request_id, audit_events.c.data,
                                         audit_events.c.at))).all()
        items = (await conn.execute(raw(outbox.c.request_id, outbox.c.payload, outbox.c.next_attempt_at,
                                        outbox.c.created_at, outbox.c.status, outbox.c.attempts))).all()
    for found in (rows, audits, items):
        assert len(found) == 2 and found[0][1:] == found[1][1:], found


def test_sqlites_datetime_text_is_what_sqlalchemys_own_processor_writes() -> None:
    """UTCDateTime's one-call SQLite bind processor writes exactly the text SQLAlchemy's DATETIME
    writes (what every stored time and every comparison in SQL relies on), and refuses a naive time."""
    import random
    from datetime import UTC, datetime, timezone

    import pytest
    from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite

    from storage.schema import UTCDateTime

    class Generic(UTCDateTime):  # the same type with SQLAlchemy's own composition of the two processors
        bind_processor = sa.types.TypeDecorator.bind_processor
        cache_ok = True

    dialect = SQLiteDialect_aiosqlite()
    fast = UTCDateTime()._cached_bind_processor(dialect)
    generic = Generic()._cached_bind_processor(dialect)
    assert fast is not None and generic is not None
    assert isinstance(generic(datetime(2026, 1, 1, tzinfo=UTC)), str)  # SQLite's DATETIME wrote text
    rng = random.Random(3)
    samples = [datetime(1, 1, 2, tzinfo=UTC), datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC),
               datetime(2026, 12, 1, 19, 0, 0, 0, tzinfo=UTC), datetime(2026, 12, 1, 19, 0, 0, 1, tzinfo=UTC)]
    for _ in range(2000):
        offset = timezone(timedelta(minutes=rng.randint(-14 * 60, 14 * 60)))
        samples.append(datetime(rng.randint(2, 9998), rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 23),
                                rng.randint(0, 59), rng.randint(0, 59), rng.choice([0, rng.randint(0, 999999)]),
                                tzinfo=offset))
    for value in [*samples, None]:
        assert fast(value) == generic(value), value
    with pytest.raises(ValueError, match="naive"):
        fast(datetime(2026, 1, 1))


# Request columns added after 0010 (0012_undo_and_stats): rows written by an older schema have none.
LATER_THAN_0010 = ("undo_until", "first_viewed_at")


async def insert_as_0010(store: Any, request: Any) -> None:
    """`request`'s row as the schema up to 0010 had it (no later columns)."""
    from storage.values import request_values

    old = sa.table("requests", *(sa.column(c.name, c.type) for c in requests.columns if c.name not in LATER_THAN_0010))
    row = {k: v for k, v in request_values(request).items() if k not in LATER_THAN_0010}
    async with store.write_engine.begin() as conn:
        await conn.execute(old.insert().values(**row))


async def test_upgrading_to_0008_fills_each_requests_owner_from_its_token(empty_db_url: str) -> None:
    from storage.migrate import upgrade
    from storage.values import request_values

    await upgrade(empty_db_url, "0007_channel_pace")
    store = await open_store(empty_db_url)
    try:
        made = {"apr_a": {"api_token": "agent-a"}, "apr_b": {"api_token": "agent-a"}, "apr_c": {}}
        later = ("owner", *LATER_THAN_0010)
        old = sa.table("requests", *(sa.column(c.name, c.type) for c in requests.columns if c.name not in later))
        async with store.write_engine.begin() as conn:  # rows as 0007 had them: no owner column yet
            for request_id, extra in made.items():
                row = request_values(make_request(request_id, extra=extra))
                for name in later:
                    row.pop(name, None)
                await conn.execute(old.insert().values(**row))
        await upgrade(empty_db_url)
        assert await store.count_pending("agent-a") == 2
        async with store.engine.connect() as conn:
            owners = dict((await conn.execute(sa.select(requests.c.id, requests.c.owner))).all())
        assert owners == {"apr_a": "agent-a", "apr_b": "agent-a", "apr_c": None}
        assert await schema_diff(store) == []
    finally:
        await store.close()


async def test_upgrading_to_0010_adds_resume_claims_beside_what_was_there(empty_db_url: str) -> None:
    """0010_resume_claims adds the table the resume claims live in (bot/domain/resumes.py), keeps every
    row that was there, and its downgrade takes the table away again."""
    from alembic import command

    from bot.domain.resumes import ResumeClaim, ResumeState
    from storage.migrate import alembic_config, upgrade

    await upgrade(empty_db_url, "0009_run_failed_steps")
    store = await open_store(empty_db_url)
    try:
        request = full_request()
        await insert_as_0010(store, request)
        await upgrade(empty_db_url)
        assert await store.get_request(request.id) == request
        assert await schema_diff(store) == []
        wanted = ResumeClaim("agent-a", "langgraph:t:i", "host|1|x", ResumeState.RESUMING,
                             T0 + timedelta(minutes=5), T0, T0, ("apr_1",))
        assert await store.claim_resume(wanted, T0) == (True, wanted)
        assert await store.get_resume("agent-a", "langgraph:t:i") == wanted
        assert await store.get_resume("agent-b", "langgraph:t:i") is None

        def downgrade(sync_conn: Any) -> None:
            cfg = alembic_config()
            cfg.attributes["connection"] = sync_conn
            command.downgrade(cfg, "0009_run_failed_steps")

        async with store.write_engine.begin() as conn:
            await conn.run_sync(downgrade)
        async with store.engine.connect() as conn:
            tables = await conn.run_sync(lambda c: sa.inspect(c).get_table_names())
        assert "resume_claims" not in tables and "requests" in tables
        assert await current_revision(store.engine) == "0009_run_failed_steps"
    finally:
        await store.close()
