"""Benchmark of one timer sweep: 1,000 due requests among 10,000 and among 100,000 pending ones.

    python -m bench.sweep [--db sqlite|postgres|both] [--pending 10000,100000] [--due 1000] [--pg-url URL]

For each engine and each pending count: a scratch database migrated by Alembic (a temp SQLite
file, or a PostgreSQL database created next to --pg-url and dropped afterwards); the pending
requests inserted in bulk with SQLAlchemy (not through the API: this measures the sweep, not the
set-up), `--due` of them due one minute ago (a reminder), the rest due between 1 hour and 1 day
ahead; then ONE call of `Timers.sweep()`, the function every process's APScheduler job calls
(`--repeat` times, the same rows made due again each time). It
claims the due rows in batches, writes each one's new timer state, its audit row and its outbox
item (the reminder), and commits; no Slack calls happen inside a sweep (the outbox makes them), so
none are made here. Printed: the plan of the claim query (EXPLAIN QUERY PLAN / EXPLAIN), the sweep's
wall-clock time and this process's CPU time (`time.process_time`: on a shared machine the wall clock
also counts other processes' work; PostgreSQL's backend is another process, not in it), and the
due-rows query alone. The sweep reads due rows through ix_requests_next_due_at, so its
time follows the number of DUE rows, not of pending ones. No figure here is asserted anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench.procs import scratch_database
from bot.domain.timing import Timing, initial_state
from bot.approvals.service import Service
from bot.approvals.timers import Timers, batch_for
from storage.schema import audit_events, outbox, requests
from storage.sql import SqlStore
from storage.stores import open_store
from storage.sweep_sql import claim_statement

NOW = datetime(2030, 1, 7, 12, 0, tzinfo=UTC)
TIMING = Timing(remind_every=timedelta(minutes=10), remind_max=3, timeout=timedelta(days=2))
CHUNK = 5000


class FixedClock:
    def now(self) -> datetime:
        return NOW


def _rows(pending: int, due: int) -> list[dict[str, Any]]:
    rows = []
    timing = TIMING.to_json()
    for n in range(pending):
        created = NOW - timedelta(minutes=11) if n < due else NOW - timedelta(minutes=5)
        state = initial_state(TIMING, created)
        # Due ones: their first reminder was due a minute ago. The rest: due 1 h .. 1 day ahead.
        remind_at = created + timedelta(minutes=10) if n < due else NOW + timedelta(hours=1, seconds=(n * 7919) % 82800)
        rows.append({
            "id": f"apr_bench{n:021d}", "kind": "approval", "status": "pending", "version": 1,
            "action_name": "send_email", "params": {"to": f"user{n}@example.com"}, "params_schema": None,
            "summary": f"Send email {n}", "context": None, "preview": None, "risk": "high", "channel": "C1",
            "approvers": ["U1", "U2"], "callback_url": None, "requested_by": "bench", "card_channel": "C1",
            "card_ts": f"1700000000.{n:06d}", "thread_ts": None, "idempotency_key": None, "body_hash": None,
            "extra": {}, "created_at": created, "updated_at": created, "next_due_at": remind_at,
            "timing": timing, "reminders_sent": 0, "remind_at": remind_at, "escalation_loop": 0,
            "escalation_level": 0, "escalate_at": None, "expires_at": state.expires_at, "snoozed_until": None,
            "escalation": None, "card_permalink": None,
        })  # fmt: skip
    return rows


async def _fill(store: SqlStore, pending: int, due: int) -> None:
    rows = _rows(pending, due)
    async with store.unit() as unit:
        for start in range(0, len(rows), CHUNK):
            await unit.conn.execute(requests.insert(), rows[start : start + CHUNK])  # type: ignore[attr-defined]
    async with store.write_engine.connect() as conn:
        await conn.exec_driver_sql("ANALYZE")  # fresh statistics, as a live database would have
        await conn.commit()


async def _plan(store: SqlStore) -> list[str]:
    """The engine's plan for exactly the statement the sweep claims with."""
    postgres = store.dialect == "postgresql"
    compiled = claim_statement(batch_for(store.dialect), postgres=postgres).compile(dialect=store.engine.dialect)
    values = {**compiled.params, "b_now": NOW}
    params = tuple(values[name] for name in compiled.positiontup or ())
    explain = "EXPLAIN" if postgres else "EXPLAIN QUERY PLAN"
    async with store.engine.connect() as conn:
        result = await conn.exec_driver_sql(f"{explain} {compiled}", params)
        return [str(r[0]) if postgres else str(r[-1]) for r in result]


async def _due_query_ms(store: SqlStore) -> float:
    stmt = sa.select(requests.c.id).where(requests.c.next_due_at <= NOW, requests.c.status == "pending")
    best = float("inf")
    for _ in range(5):
        async with store.engine.connect() as conn:
            started = time.perf_counter()
            found = len((await conn.execute(stmt)).all())
            best = min(best, (time.perf_counter() - started) * 1000)
    assert found > 0
    return best


async def run(engine: str, pending: int, due: int, pg_url: str, repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        async with scratch_database(engine, pg_url=pg_url, workdir=Path(tmp)) as url:
            store = await open_store(url)
            try:
                started = time.perf_counter()
                await _fill(store, pending, due)
                fill_s = time.perf_counter() - started
                plan = await _plan(store)
                due_ms = await _due_query_ms(store)
                timers = Timers(Service(store, clock=FixedClock()), FixedClock())
                times, cpus = [], []
                for _ in range(repeat):
                    started, cpu_started = time.perf_counter(), time.process_time()
                    report = await timers.sweep()
                    times.append(time.perf_counter() - started)
                    cpus.append(time.process_time() - cpu_started)
                    assert report.reminded == due, report
                    assert len([i for i in await store.outbox_items() if i.kind == "slack.remind"]) == due
                    again = await timers.sweep()  # the same tick once more: nothing left to do
                    assert again.reminded == 0
                    await _reset(store, due)
            finally:
                await store.close()
    return {"engine": engine, "pending": pending, "due": due, "fill_s": fill_s, "plan": plan, "due_ms": due_ms,
            "times": sorted(times), "cpus": sorted(cpus), "rounds": report.rounds}


async def _reset(store: SqlStore, due: int) -> None:
    """Make the same rows due again and forget what the sweep wrote, for the next repetition."""
    ids = [f"apr_bench{n:021d}" for n in range(due)]
    remind_at = NOW - timedelta(minutes=1)
    async with store.unit() as unit:
        conn = unit.conn  # type: ignore[attr-defined]
        await conn.execute(requests.update().where(requests.c.id.in_(ids)).values(
            reminders_sent=0, remind_at=remind_at, next_due_at=remind_at))
        await conn.execute(outbox.delete())
        await conn.execute(audit_events.delete())


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--pending", default="10000,100000")
    parser.add_argument("--due", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5, help="sweeps per configuration (the same rows made due again)")
    parser.add_argument("--pg-url", default=os.environ.get("SIGNOFF_BENCH_PG_URL",
                                                           "postgresql://postgres:postgres@127.0.0.1/postgres"))
    args = parser.parse_args()
    engines = ["sqlite", "postgresql"] if args.db == "both" else ["postgresql" if args.db == "postgres" else "sqlite"]
    counts = [int(c) for c in args.pending.split(",")]
    print(f"# timer sweep: {args.due} due among N pending ({platform.python_implementation()} "
          f"{platform.python_version()}, {os.cpu_count()} CPUs)")
    for engine in engines:
        results = []
        for pending in counts:
            result = await run(engine, pending, args.due, args.pg_url, args.repeat)
            results.append(result)
            print(f"\n## {engine}, {pending:,} pending, {args.due:,} due (set-up insert {result['fill_s']:.1f} s)")
            print("claim query plan:")
            for line in result["plan"]:
                print(f"    {line}")
            print(f"due-rows query alone: {result['due_ms']:.1f} ms (best of 5)")
            times, cpus = result["times"], result["cpus"]
            best, median = times[0], times[len(times) // 2]
            cpu_median = cpus[len(cpus) // 2]
            print(f"ONE SWEEP: best {best * 1000:.0f} ms, median {median * 1000:.0f} ms of {len(times)} "
                  f"for {args.due:,} reminders ({median * 1e6 / args.due:.0f} µs per due row at the median, "
                  f"{result['rounds']} rounds of claims)")
            # This process's CPU (process_time): on a shared machine the wall clock also counts others' work.
            # PostgreSQL's own backend CPU is not in it (another process).
            print(f"ONE SWEEP CPU (this process): median {cpu_median * 1000:.0f} ms "
                  f"({cpu_median * 1e6 / args.due:.0f} µs per due row)")
        if len(results) > 1:
            def median_of(r: dict[str, Any]) -> float:
                return float(r["times"][len(r["times"]) // 2])

            ratio = median_of(results[-1]) / median_of(results[0])
            print(f"\n{engine}: median sweep with {counts[-1]:,} pending / with {counts[0]:,} pending = {ratio:.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
