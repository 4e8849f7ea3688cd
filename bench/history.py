"""Every hot path's server cost on a fresh database and on one with a long history, side by side.

    python -m bench.history [--db sqlite|postgres|both] [--rows 1000,1000000] [--repeat 25] [--pg-url URL]
                            [--warmup 3] [--paths submit,click,...] [--retention]

For each engine and each `--rows` size: a scratch database migrated by Alembic, `rows` history requests
written in bulk (bench/history_seed.py: decided, expired, a few pending, their audit rows sealed, their
outbox items delivered, grants; all of it older than 31 days, so the live working set is the same at
every size), then Signoff in this process (the sandbox's Slack emulator, a policy allowing `read_*`,
U1 has opened App Home). Each path runs `--repeat` times after 3 warm-up runs, on one app per size at once, the runs
alternating between them (so a change in the machine's load falls on every size alike); one run is the path's
request and everything it sets off, until the outbox has delivered all of it and no Slack listener is
still running (so a card post or a Home publish behind the answer counts):

  submit          POST /api/v1/approvals (risk high: a card to post)
  allowed submit  POST /api/v1/approvals of `read_orders`, which policy allows (no card)
  click           a signed Approve click on a posted card, until the request is decided
  long-poll wake  GET ?wait=30 held, then the click: until the long-poll answered
  App Home        the app_home_opened event: the Home read and published (views.publish)
  /signoff pending  the slash command answered
  timer sweep     the job's function: Timers.sweep() and the audit seal, nothing due
  list pending    GET /api/v1/approvals?status=pending&limit=50
  list approved   GET /api/v1/approvals?status=approved&limit=50 (the oldest first: history, at 1 M)
  audit page      GET /api/v1/audit?since=<1 h ago>&limit=100 (what an export reads per page)
  audit by tool   GET /api/v1/audit?tool=send_email&type=decided&limit=100

Cost is CPU, not wall time (robust to a busy machine): this process's CPU (`time.process_time`: the app,
SQLite's work in its thread, and the emulator's, which is the same at every size) plus, on PostgreSQL,
the CPU of this database's backends (/proc/PID/schedstat, nanoseconds); the median of the runs. Beside
it, the statements the run sent (SqlStore.watch). The ratio is the history's median over the fresh one's
(target: <= 1.2). `--retention`: then one sweep's share of retention (SIGNOFF_RETENTION_DAYS=30, so all
the history is old) on the biggest database: each batch's transaction time and the CPU per archived
request. No figure is asserted anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.core import DEFAULT_PG_URL
from bench.harness import API_TOKEN, InProcessApp, start_app
from bench.history_seed import seed
from bench.procs import scratch_database
from bot.approvals.retention import Retention
from bot.process.clock import SystemClock
from bot.process.lifecycle import SIGNOFF, Signoff
from bot.sandbox import SlackEmulator
from storage.sql import SqlStore
from storage.stores import open_store

POLICY = """\
rules:
  - name: reads-are-fine
    tool: read_*
    effect: allow
    tier: low
"""
WARMUP = 3
PATHS = ("submit", "allowed submit", "click", "long-poll wake", "App Home", "/signoff pending", "timer sweep",
         "list pending", "list approved", "audit page", "audit by tool")


@dataclass
class Figures:
    cpu_ms: dict[str, list[float]] = field(default_factory=dict)
    statements: dict[str, list[int]] = field(default_factory=dict)
    seed_s: float = 0.0

    def cpu(self, path: str) -> float:
        return statistics.median(self.cpu_ms[path])

    def stmts(self, path: str) -> float:
        return statistics.median(self.statements[path])


class Backends:
    """CPU of this database's PostgreSQL backends (other processes), in ms; 0 on SQLite."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.pids: list[int] = []

    async def refresh(self) -> None:
        """Read the backends' pids (before a run: this read's own CPU is not counted; its connection,
        back in the pool, may serve the run, so it is counted like the others)."""
        if self.store.dialect != "postgresql":
            return
        async with self.store.engine.connect() as conn:
            rows = await conn.exec_driver_sql("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
            self.pids = [int(r[0]) for r in rows]

    def ms(self) -> float:
        total = 0
        for pid in self.pids:
            try:
                total += int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                pass
        return total / 1e6


class Paths:
    """One run of each hot path on a running app; `prepare` runs before each run, not counted."""

    def __init__(self, app: InProcessApp, signoff: Signoff) -> None:
        self.app, self.signoff = app, signoff
        self.headers = {"Authorization": f"Bearer {API_TOKEN}"}
        self.ready: list[dict[str, Any]] = []  # requests with their card posted, for the clicks

    async def quiet(self) -> None:
        """Until the outbox has delivered everything due and no Slack listener is still running."""
        signoff = self.signoff
        while True:
            while len(signoff.backlog) or signoff.background:  # in memory: no statement, little CPU
                await asyncio.sleep(0.0005)
            await signoff.dispatcher.drain()
            if not len(signoff.backlog) and not signoff.background and not signoff.dispatcher.in_flight:
                return

    async def _call(self, method: str, path: str, *, json: Any = None, status: int = 200) -> Any:
        async with self.app.session.request(method, self.app.url + path, json=json, headers=self.headers) as resp:
            body = await resp.json()
            if resp.status != status:
                raise RuntimeError(f"{method} {path} answered {resp.status}: {body}")
            return body

    async def submit(self) -> None:
        await self.app.submit()
        await self.quiet()

    async def allowed(self) -> None:
        body = {**_approval(), "action": {"name": "read_orders", "params": {"customer": "c-42"}}, "preview": None}
        async with self.app.session.post(self.app.url + "/api/v1/approvals", json=body, headers=self.headers) as resp:
            got = await resp.json()
            if resp.status not in (200, 201) or got["status"] != "approved":
                raise RuntimeError(f"the allowed submit answered {resp.status}: {got}")
        await self.quiet()

    async def prepare_click(self) -> None:
        self.ready.append(await self.app.submit())
        await self.quiet()

    async def click(self) -> None:
        request = self.ready.pop()
        await self.app.click(request, "U1")
        decided = await self.signoff.service.wait(request["id"], 30)  # what a long-poll waits on
        if decided.status.value != "approved":
            raise RuntimeError(f"the click did not approve {request['id']}: {decided.status}")
        await self.quiet()

    async def wake(self) -> None:
        request = self.ready.pop()
        poll = asyncio.ensure_future(self._call("GET", f"/api/v1/approvals/{request['id']}?wait=30"))
        while request["id"] not in self.signoff.service.waiters.waited_ids():
            await asyncio.sleep(0.0005)
        await self.app.click(request, "U1")
        answer = await poll
        if answer["status"] != "approved":
            raise RuntimeError(f"the long-poll answered {answer['status']}")
        await self.quiet()

    async def home(self) -> None:
        await self.app.slack_client.event({"type": "app_home_opened", "user": "U1", "channel": "DU1", "tab": "home"})
        await self.quiet()

    async def pending(self) -> None:
        await self.app.slack_client.command(user="U1", text="pending")
        await self.quiet()

    async def sweep(self) -> None:
        assert self.signoff.sweep_job is not None
        await self.signoff.sweep_job.sweep()

    async def list_pending(self) -> None:
        await self._call("GET", "/api/v1/approvals?status=pending&limit=50")

    async def list_approved(self) -> None:
        await self._call("GET", "/api/v1/approvals?status=approved&limit=50")

    async def audit_page(self) -> None:
        since = (datetime.now(UTC) - timedelta(hours=1)).isoformat().replace("+00:00", "Z")
        await self._call("GET", f"/api/v1/audit?since={since}&limit=100")

    async def audit_by_tool(self) -> None:
        await self._call("GET", "/api/v1/audit?tool=send_email&type=decided&limit=100")

    def table(self) -> dict[str, tuple[Callable[[], Awaitable[None]] | None, Callable[[], Awaitable[None]]]]:
        return {"submit": (None, self.submit), "allowed submit": (None, self.allowed),
                "click": (self.prepare_click, self.click), "long-poll wake": (self.prepare_click, self.wake),
                "App Home": (None, self.home), "/signoff pending": (None, self.pending),
                "timer sweep": (None, self.sweep), "list pending": (None, self.list_pending),
                "list approved": (None, self.list_approved), "audit page": (None, self.audit_page),
                "audit by tool": (None, self.audit_by_tool)}


def _approval() -> dict[str, Any]:
    from bench.harness import approval_body

    return approval_body()


async def measure(db_urls: list[str], repeat: int, workdir: Path, only: tuple[str, ...], *,
                  warmup: int = WARMUP) -> list[Figures]:
    """Every path on an app per database, the runs of each path alternating between them (run i on the
    first, run i on the second, ...), so a change in the machine's load falls on every size alike."""
    slack = SlackEmulator()
    await slack.start()
    slack.add_channel("C1", "approvals")
    policy = workdir / "policy.yaml"
    policy.write_text(POLICY)
    figures = [Figures() for _ in db_urls]
    opened: list[tuple[SqlStore, InProcessApp, Paths, Backends]] = []
    seen: list[int] = [0]
    unwatch: list[Callable[[], None]] = []
    try:
        for url in db_urls:
            store = await open_store(url)
            app = await start_app(url, slack, store=store, SIGNOFF_POLICY=str(policy),
                                  SIGNOFF_SLACK_CHANNEL_PACE_SECONDS="0", SIGNOFF_SWEEP_SECONDS="3600",
                                  SIGNOFF_SIMILAR_MIN="0")
            opened.append((store, app, Paths(app, app.runner.app[SIGNOFF]), Backends(store)))
            unwatch.append(store.watch(lambda _s: seen.__setitem__(0, seen[0] + 1)))
        for _, _, paths, _ in opened:
            await paths.home()  # U1 has opened App Home: submits and decisions republish it
        for name in only:
            for i in range(warmup + repeat):
                for (_, _, paths, backends), got in zip(opened, figures):
                    prepare, run = paths.table()[name]
                    if prepare is not None:
                        await prepare()
                    await backends.refresh()
                    seen[0] = 0
                    cpu0, pg0 = time.process_time(), backends.ms()
                    await run()
                    cpu = (time.process_time() - cpu0) * 1000 + backends.ms() - pg0
                    if i >= warmup:
                        got.cpu_ms.setdefault(name, []).append(cpu)
                        got.statements.setdefault(name, []).append(seen[0])
    finally:
        for stop in unwatch:
            stop()
        for store, app, _, _ in opened:
            await app.stop()
            await store.close()
        await slack.stop()
    return figures


async def run_engine(engine: str, sizes: list[int], args: argparse.Namespace, workdir: Path) -> list[Figures]:
    async with contextlib.AsyncExitStack() as stack:
        urls, seeded = [], []
        for rows in sizes:
            url = await stack.enter_async_context(scratch_database(engine, pg_url=args.pg_url, workdir=workdir))
            started = time.perf_counter()
            await seed(url, rows, datetime.now(UTC))
            seeded.append(time.perf_counter() - started)
            print(f"  {engine}: {rows:,} history requests seeded in {seeded[-1]:.1f} s", flush=True)
            urls.append(url)
        figures = await measure(urls, args.repeat, workdir, args.paths, warmup=args.warmup)
        for got, took in zip(figures, seeded):
            got.seed_s = took
        if args.retention:
            await retention(engine, urls[-1], sizes[-1])
        return figures


async def retention(engine: str, db_url: str, rows: int) -> None:
    """One sweep's share of retention (SIGNOFF_RETENTION_DAYS=30: all of the history is older) on the
    biggest database: how long each batch's transaction took, and the CPU per archived request."""
    store = await open_store(db_url)
    job = Retention(store, SystemClock(), 30)
    batches: list[float] = []
    archive = job.rows.archive_batch

    async def timed(*args: Any, **kwargs: Any) -> int:
        started = time.perf_counter()
        try:
            return await archive(*args, **kwargs)
        finally:
            batches.append((time.perf_counter() - started) * 1000)

    job.rows.archive_batch = timed  # type: ignore[method-assign]
    backends = Backends(store)
    try:
        await backends.refresh()
        cpu0, pg0 = time.process_time(), backends.ms()
        report = await job.tick()
        cpu = (time.process_time() - cpu0) * 1000 + backends.ms() - pg0
    finally:
        await store.close()
    per = cpu / max(1, report.archived) * 1000
    print(f"  {engine} retention, one sweep's share on {rows:,} rows: {report.archived:,} requests archived and "
          f"{report.forgotten:,} delivered rows deleted in {len(batches)} batches of {job.batch}; a batch's transaction "
          f"{statistics.median(batches):.0f} ms median, {max(batches):.0f} ms at most (wall clock); "
          f"{per:.0f} µs of CPU per archived request{'; more at the next sweep' if report.more else ''}", flush=True)


def report(engine: str, sizes: list[int], results: list[Figures], paths: tuple[str, ...]) -> None:
    small, big = results[0], results[-1]
    print(f"\n## {engine}: server CPU per run, median ms (statements per run)")
    head = "  ".join(f"{f'{n:,} rows':>18}" for n in sizes)
    print(f"  {'path':<18}{head}  {'ratio':>6}")
    for path in paths:
        cells = "  ".join(f"{f'{r.cpu(path):.2f} ({r.stmts(path):.0f})':>18}" for r in results)
        print(f"  {path:<18}{cells}  {big.cpu(path) / small.cpu(path):>6.2f}")
    print(f"  seeding: " + ", ".join(f"{n:,} rows in {r.seed_s:.1f} s" for n, r in zip(sizes, results)))


async def main_async(args: argparse.Namespace) -> None:
    engines = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    sizes = [int(n) for n in args.rows.split(",")]
    print(f"# hot paths on a fresh database and on a long history ({platform.python_implementation()} "
          f"{platform.python_version()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
    with tempfile.TemporaryDirectory(prefix="signoff-bench-history-") as tmp:
        for engine in engines:
            results = await run_engine(engine, sizes, args, Path(tmp))
            report(engine, sizes, results, args.paths)
    print(f"\ncommand: {args.command}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--rows", default="1000,1000000", help="history sizes, comma-separated (the first is the base)")
    parser.add_argument("--repeat", type=int, default=25, help="counted runs of each path")
    parser.add_argument("--retention", action="store_true",
                        help="then one sweep's share of retention on the biggest database (it archives it)")
    parser.add_argument("--warmup", type=int, default=WARMUP, help="uncounted runs of each path first")
    parser.add_argument("--paths", default=",".join(PATHS), help="which paths, comma-separated")
    parser.add_argument("--pg-url", default=os.environ.get("SIGNOFF_BENCH_PG_URL", DEFAULT_PG_URL))
    args = parser.parse_args(argv)
    args.paths = tuple(p.strip() for p in args.paths.split(",") if p.strip())
    unknown = [p for p in args.paths if p not in PATHS]
    if unknown:
        parser.error(f"--paths: no path {unknown[0]!r} (one of {', '.join(PATHS)})")
    given = sys.argv[1:] if argv is None else argv
    args.command = " ".join(["python -m bench.history", *(shlex.quote(a) for a in given)])
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
