"""After the database drops the server's connections (a restart, a failover), the store recovers by
itself: at most one call fails, and every call after it works, with no pre-ping per checkout.

On PostgreSQL the store has two pools: asyncpg's own for reads, submits and lone decisions
(storage/postgres/raw.py) and SQLAlchemy's for units. Both hold live connections when the first test
terminates every backend of the database; then a mix of calls runs over both pools: at most one of
them fails (as a disconnect), whichever pool meets a dead connection first. That holds because a
disconnect in either pool makes the other drop its connections too: the last two tests kill only
one pool's backend and check that the other pool's live connection was replaced. SQLite has no
server to restart and no second pool, so there the same calls must simply all work.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from bot.domain.model import Actor, Outcome, Via
from bot.approvals.service import Service
from storage.postgres.fast import driver_rows
from storage.schema import outbox
from storage.sql import SqlStore
from storage.stores import open_store
from tests.support.databases import PG_URL, pg_admin
from tests.storage.test_lone_unit import spec
from tests.support.waits import until


async def _terminate(where: str) -> None:
    await pg_admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE {where}")


async def test_the_store_recovers_after_the_database_drops_its_connections(db_url: str) -> None:
    store = await open_store(db_url)
    service = Service(store)
    try:
        first, _ = await service.submit(spec(1))  # every pool now holds a live connection
        assert await store.get_request(first.id) == first
        async with store.unit() as unit:
            assert await unit.get_request(first.id) == first
        if PG_URL:
            await _terminate(f"datname = '{sa.engine.make_url(db_url).database}'")
        submitted: list[str] = []

        async def submit() -> Any:
            submitted.append((await service.submit(spec(10 + len(submitted))))[0].id)

        async def in_a_unit() -> Any:
            async with store.unit() as unit:
                assert await unit.get_request(first.id) is not None

        async def decide() -> Any:
            assert (await service.decide(submitted[-1], Outcome.APPROVED, via=Via.BUTTON,
                                         actor=Actor("U1", "ann"))).won

        calls: list[Callable[[], Awaitable[Any]]] = [lambda: store.get_request(first.id), in_a_unit, submit, decide]
        failures = 0
        for call in calls * 2:
            try:
                await call()
            except DBAPIError as exc:
                assert exc.connection_invalidated
                failures += 1
        assert failures <= 1
        for call in calls:  # everything works again
            await call()
        assert (await store.get_request(submitted[-1])).status.value == "approved"  # type: ignore[union-attr]
    finally:
        await store.close()


async def _raw_pid(store: SqlStore) -> int:
    assert store._raw is not None

    async def refused() -> Any:
        raise AssertionError("SELECT pg_backend_pid() refused")
    return int((await store._raw.fetchrow("SELECT pg_backend_pid()", (), refused))[0])


async def _unit_pid(store: SqlStore) -> int:
    async with store.unit() as unit:
        return int((await unit.conn.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one())


@pytest.mark.postgres_only  # two pools to keep in step: SQLite has one
async def test_a_disconnect_in_sqlalchemys_pool_replaces_the_raw_pools_connections(db_url: str) -> None:
    store = await open_store(db_url)
    try:
        raw, unit = await _raw_pid(store), await _unit_pid(store)
        assert raw != unit
        await _terminate(f"pid = {unit}")  # only SQLAlchemy's connection dies
        with pytest.raises(DBAPIError) as failed:
            await _unit_pid(store)
        assert failed.value.connection_invalidated
        assert await _raw_pid(store) != raw  # its live connection was replaced too
        assert await _unit_pid(store) != unit
    finally:
        await store.close()


@pytest.mark.postgres_only  # two pools to keep in step: SQLite has one
async def test_a_disconnect_in_the_raw_pool_replaces_sqlalchemys_connections(db_url: str) -> None:
    store = await open_store(db_url)
    try:
        unit = await _unit_pid(store)
        raw = await _raw_pid(store)
        assert store._raw is not None

        async def refused() -> Any:
            raise AssertionError("pg_sleep refused")
        sleeping = asyncio.create_task(store._raw.fetchrow("SELECT pg_sleep(30)", (), refused))
        async def running() -> Any:
            return await _pg_admin_scalar(f"SELECT count(*) FROM pg_stat_activity WHERE pid = {raw} "
                                          "AND query LIKE 'SELECT pg_sleep%'")

        await until(running, "the statement to run on the server")
        await _terminate(f"pid = {raw}")  # only the raw pool's connection dies, mid-statement
        with pytest.raises(DBAPIError) as failed:
            await sleeping
        assert failed.value.connection_invalidated
        assert await _unit_pid(store) != unit  # SQLAlchemy's live connection was replaced too
        assert await _raw_pid(store) != raw
    finally:
        await store.close()


async def _pg_admin_scalar(sql: str) -> Any:
    import asyncpg

    conn = await asyncpg.connect(PG_URL.replace("postgres://", "postgresql://", 1))
    try:
        return await conn.fetchval(sql)
    finally:
        await conn.close()


@pytest.mark.postgres_only  # two pools to keep in step: SQLite has one
async def test_a_statement_asyncpg_refuses_on_a_live_connection_drops_no_pool(db_url: str) -> None:
    """A statement asyncpg will not send (more than 32767 arguments) is a refusal, not a lost
    connection: it runs again through SQLAlchemy, whose error comes back as it always did, and no
    pool drops its connections."""
    store = await open_store(db_url)
    try:
        raw, unit = await _raw_pid(store), await _unit_pid(store)
        many = 40_000
        sql = f"SELECT 1 WHERE 0 IN ({', '.join(f'${n}::int' for n in range(1, many + 1))})"
        with pytest.raises(DBAPIError) as failed:
            await store._raw.fetchrow(sql, list(range(many)),  # type: ignore[union-attr]
                                      partial(driver_rows, store.engine, sql, list(range(many))))
        assert not failed.value.connection_invalidated
        assert "32767" in str(failed.value)  # SQLAlchemy's wrapping of asyncpg's own refusal
        assert await _raw_pid(store) == raw and await _unit_pid(store) == unit  # nothing dropped
    finally:
        await store.close()


REFUSE = ["CREATE SEQUENCE claim_attempts", """
CREATE FUNCTION refuse_claims() RETURNS trigger AS $$
BEGIN
    IF nextval('claim_attempts') <= {refusals} THEN  -- a sequence is not rolled back with the statement
        RAISE EXCEPTION 'claim refused by the test';
    END IF;
    RETURN NULL;
END $$ LANGUAGE plpgsql""",
          "CREATE TRIGGER refuse_claims BEFORE UPDATE ON outbox FOR EACH STATEMENT EXECUTE FUNCTION refuse_claims()"]


async def _outbox_rows(store: SqlStore) -> list[tuple[Any, ...]]:
    async with store.engine.connect() as conn:
        return [tuple(r) for r in (await conn.execute(sa.select(outbox.c.id, outbox.c.status, outbox.c.attempts,
                                                                outbox.c.lease_until).order_by(outbox.c.id))).all()]


@pytest.mark.postgres_only  # two pools to keep in step: SQLite has one
@pytest.mark.parametrize("refusals", [1, 1_000])
async def test_an_outbox_claim_the_server_refuses_writes_nothing_and_runs_once_more(db_url: str, refusals: int) -> None:
    """The claim runs on the raw pool; the server refusing it (here a trigger) wrote nothing, so it
    runs once more through SQLAlchemy: after one refusal that claim answers, and a claim refused
    every time raises SQLAlchemy's error. Either way no pool drops its connections, and a refused
    claim leaves every outbox row as it was."""
    store = await open_store(db_url)
    try:
        await Service(store).submit(spec(1))
        before = await _outbox_rows(store)
        assert [r[1] for r in before] == ["pending"]
        async with store.write_engine.begin() as conn:
            for statement in REFUSE:
                await conn.exec_driver_sql(statement.replace("{refusals}", str(refusals)))
        raw, unit = await _raw_pid(store), await _unit_pid(store)
        claims: list[str] = []
        stop = store.watch(lambda sql: claims.append(sql) if sql.lstrip().upper().startswith(("UPDATE", "WITH"))
                           and "outbox" in sql else None)
        try:
            if refusals == 1:
                items = await store.claim_outbox(datetime.now(UTC), limit=10, lease_seconds=60)
                assert [i.id for i in items] == [before[0][0]]
                after = await _outbox_rows(store)
                assert after[0][2] == before[0][2] + 1 and after[0][3] is not None  # claimed once
            else:
                with pytest.raises(DBAPIError) as failed:
                    await store.claim_outbox(datetime.now(UTC), limit=10, lease_seconds=60)
                assert not failed.value.connection_invalidated
                assert "claim refused by the test" in str(failed.value)
                assert await _outbox_rows(store) == before
        finally:
            stop()
        assert len(claims) == 2  # the raw pool's, then SQLAlchemy's
        assert await _raw_pid(store) == raw and await _unit_pid(store) == unit  # nothing dropped
    finally:
        await store.close()
