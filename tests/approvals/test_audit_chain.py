"""The audit log's hash chain (issue 37): every row linked to the one before by SHA-256; `signoff audit
verify` proves it and names the first altered or missing row; rows written before the chain existed
are chained by the migration; on PostgreSQL, decisions clicked on two replicas while four sealers run
at once still make one line of positions."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from bot.approvals.audit import AuditLog
from bot.sandbox import SlackEmulator
from storage.migrate import upgrade
from storage.schema import audit_events
from storage.stores import open_store
from tests.support.audit import seed, signoff
from tests.support.databases import ENGINE, PG_URL, pg_admin, pg_url_for
from tests.support.app import App, start_app
from tests.support.outbox import drain, finished


async def decide_some(app: App, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        req = await app.submit(channel="C1", approvers=["U1"])
        await app.click(req["id"], "U1", user_name="alice")
        ids.append(req["id"])
    await drain(app)
    return ids


async def test_verify_proves_the_chain_then_names_the_one_altered_row(app: App) -> None:
    await decide_some(app, 3)
    code, out, err = await signoff(app_db(app), "audit", "verify")
    assert code == 0, err
    assert out.startswith("audit chain intact: ") and "head at position" in out
    store = app.signoff.store  # type: ignore[union-attr]
    async with store.unit() as unit:  # someone with database access rewrites one decision
        victim = (await unit.conn.execute(sa.select(audit_events.c.id, audit_events.c.data)
                                          .where(audit_events.c.type == "decided").limit(1))).one()
        data = {**victim.data, "outcome": "rejected"}
        await unit.conn.execute(audit_events.update().where(audit_events.c.id == victim.id).values(data=data))
    code, out, _ = await signoff(app_db(app), "audit", "verify")
    assert code == 1
    assert f"BROKEN at row {victim.id} " in out and "altered" in out


async def test_verify_names_a_removed_row(app: App) -> None:
    await decide_some(app, 2)
    log = AuditLog(app.signoff.store)  # type: ignore[union-attr]
    await log.seal()
    store = app.signoff.store  # type: ignore[union-attr]
    async with store.unit() as unit:
        gone = (await unit.conn.execute(sa.select(audit_events.c.id, audit_events.c.seq)
                                        .where(audit_events.c.seq == 3))).one()
        await unit.conn.execute(audit_events.delete().where(audit_events.c.id == gone.id))
    report = await log.verify()
    assert not report.ok and report.broken is not None
    assert report.broken.seq == 3 and report.broken.row_id is None and "missing" in report.broken.problem
    code, out, _ = await signoff(app_db(app), "audit", "verify")
    assert code == 1 and "BROKEN at position 3: missing" in out


def app_db(app: App) -> str:
    assert app.signoff is not None
    return app.signoff.settings.database_url


@pytest.fixture
def empty_db(tmp_path: Path) -> object:
    """A database with no schema yet, on the engine under test."""
    if not PG_URL:
        return f"sqlite:///{tmp_path / 'fresh.db'}"
    name = f"signoff_audit_{tmp_path.name[-20:].lower().replace('-', '_')}"
    asyncio.run(pg_admin(f'DROP DATABASE IF EXISTS "{name}"'))
    asyncio.run(pg_admin(f'CREATE DATABASE "{name}"'))
    return pg_url_for(name)


async def test_the_migration_chains_the_rows_written_before_it(empty_db: str) -> None:
    await upgrade(empty_db, "0010_resume_claims")
    store = await open_store(empty_db)
    try:
        async with store.unit() as unit:  # rows as 0010's schema holds them (no chain columns yet)
            await unit.conn.execute(sa.text(
                "INSERT INTO audit_events (request_id, type, actor, data, at) VALUES (:r, :t, :a, :d, :at)"),
                [{"r": f"apr_old{n}", "t": "created", "a": "U1", "d": json.dumps({"risk": "high"}),
                  "at": datetime(2026, 1, 1, 0, 0, n, tzinfo=UTC) if ENGINE == "postgresql"
                  else f"2026-01-01 00:00:0{n}.000000"} for n in range(5)])
    finally:
        await store.close()
    await upgrade(empty_db)
    store = await open_store(empty_db)
    try:
        report = await AuditLog(store).verify(seal=False)
        assert report.ok and report.checked == 5 and report.head_seq == 5 and report.unsealed == 0
    finally:
        await store.close()


@pytest.mark.postgres_only
async def test_the_chain_stays_one_line_under_concurrent_decisions_and_sealers(db_url: str,
                                                                             slack: SlackEmulator) -> None:
    replicas = [await start_app(db_url, slack) for _ in range(2)]
    sealers = [await open_store(db_url, pool_size=2) for _ in range(4)]
    stop = asyncio.Event()

    async def keep_sealing(store: object) -> int:
        log, total = AuditLog(store), 0  # type: ignore[arg-type]
        while not stop.is_set():
            total += await log.seal()
            await asyncio.sleep(0)
        return total

    try:
        sealing = [asyncio.create_task(keep_sealing(s)) for s in sealers]
        submitted = await asyncio.gather(*(replicas[n % 2].submit(channel="C1", approvers=["U1"])
                                           for n in range(40)))
        await asyncio.gather(*(replicas[(n + 1) % 2].click(r["id"], "U1", user_name="alice")
                               for n, r in enumerate(submitted)))
        for replica in replicas:  # the acked clicks' decisions run after their acks: wait for them too
            await finished(replica)
        stop.set()
        sealed = sum(await asyncio.gather(*sealing))  # no sealer raised (a fork would break the unique seq)
        assert sealed > 0
        report = await AuditLog(sealers[0]).verify()
        assert report.ok, report.words()
        async with sealers[0].engine.connect() as conn:
            seqs = [r.seq for r in await conn.execute(sa.select(audit_events.c.seq).order_by(audit_events.c.seq))]
        assert seqs == list(range(1, len(seqs) + 1)) and report.checked == len(seqs) >= 80
    finally:
        stop.set()
        for replica in replicas:
            await replica.stop()
        for store in sealers:
            await store.close()


async def test_seeded_rows_are_sealed_in_batches_and_verified(store: object) -> None:
    await seed(store, 4500)  # type: ignore[arg-type]
    log = AuditLog(store)  # type: ignore[arg-type]
    assert (await log.verify(seal=False)).unsealed == 4500
    report = await log.verify()
    assert report.ok and report.checked == 4500 and report.unsealed == 0
