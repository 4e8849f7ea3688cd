"""Soak: hours of mixed load on two replicas, one of them restarted now and then, sampled once a minute.

    python -m bench.soak [--db sqlite|postgres] [--minutes 60] [--rate 1.0] [--restart-every 10]
                         [--sample-seconds 60] [--timeout 20s] [--pg-url URL]

Two `python -m bot serve` processes (A stays up, B is restarted every `--restart-every` minutes,
by SIGKILL and by SIGTERM in turn) share a scratch database and the fake Slack Web API
(bot.sandbox's emulator, in this process). Open loop, `--rate` requests a second in all:

- agents submit (to A or B) and long-poll each request (on A) until it is decided;
- 4 in 5 requests are clicked Approve by a person 0.5-5 s after their card is posted (the click goes to
  A or B; a click B could not take, because it is restarting, goes to A, as a person clicks again);
- 1 in 5 has a `--timeout` (20 s) and nobody clicks: the timer sweep expires it.

Every `--sample-seconds` one row per process: RSS (MiB), open file descriptors, asyncio tasks (its
/metrics), database connections (PostgreSQL: the process's TCP sockets to the server; SQLite: its
open handles on the database file), and the load's running totals. At the end: every request's
outcome (none lost: each one submitted before the last 40 s is decided; none doubled: one `decided`
audit row each), read from the database. Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import shlex
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from bench.core import DEFAULT_PG_URL, say
from bench.fake_slack import InProcessSlack
from bench.harness import approval_body
from bench.load import Client, click_body, sign
from bench.procs import Server, scratch_database, signoff_server
from storage.schema import audit_events
from storage.stores import open_store

TIMEOUT_SHARE = 0.2


@dataclass
class Totals:
    submitted: int = 0
    submit_errors: int = 0
    clicked: int = 0
    click_retries: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    restarts: int = 0
    started: dict[str, float] = field(default_factory=dict)  # request id -> when submitted (monotonic)


# ---------------------------------------------------------------------- process figures (Linux /proc)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def fds(pid: int) -> list[str]:
    out = []
    folder = Path(f"/proc/{pid}/fd")
    for entry in folder.iterdir():
        with contextlib.suppress(OSError):
            out.append(os.readlink(entry))
    return out


def _tcp_inodes_to(port: int) -> set[str]:
    """Socket inodes of every TCP connection on this host whose remote port is `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if int(cols[2].rsplit(":", 1)[1], 16) == port and cols[3] == "01":  # ESTABLISHED
                    found.add(cols[9])
    return found


def db_connections(pid: int, db_url: str) -> int:
    links = fds(pid)
    url = make_url(db_url)
    if url.get_backend_name() == "sqlite":
        path = str(Path(url.database or "").resolve())
        return sum(1 for link in links if link == path)
    inodes = _tcp_inodes_to(url.port or 5432)
    return sum(1 for link in links if link.startswith("socket:[") and link[8:-1] in inodes)


async def asyncio_tasks(client: Client, server: Server) -> int | None:
    try:
        text = await client.text(server.url + "/metrics")
    except Exception:
        return None
    for line in text.splitlines():
        if line.startswith("signoff_asyncio_tasks "):
            return int(float(line.split()[1]))
    return None


# ---------------------------------------------------------------------- the load


class Soak:
    def __init__(self, args: argparse.Namespace, db_url: str, slack: InProcessSlack, a: Server, b: Server) -> None:
        self.args = args
        self.db_url = db_url
        self.slack = slack
        self.a, self.b = a, b
        self.b_up = True
        self.client = Client()
        self.totals = Totals()
        self.tasks: set[asyncio.Task[Any]] = set()
        self.rng = random.Random(7)

    def spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def pick(self) -> Server:
        return self.b if self.b_up and self.rng.random() < 0.5 else self.a

    async def agents(self, until: float) -> None:
        """Open loop: one request every 1/rate s (each followed by its own long-poll and, maybe, a click)."""
        every = 1.0 / self.args.rate
        next_at = time.monotonic()
        n = 0
        while time.monotonic() < until:
            n += 1
            self.spawn(self.one(n))
            next_at += every
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))  # pacing the open loop

    async def one(self, n: int) -> None:
        times_out = self.rng.random() < TIMEOUT_SHARE
        extra: dict[str, Any] = {"approvers": ["U1"], "channel": f"C{1 + n % 20}", "summary": f"Soak {n}"}
        if times_out:
            extra.update(timeout={"after": self.args.timeout}, reminders=False, escalation=False)
        server = self.pick()
        try:
            status, body = await self.client.api("POST", server.url + "/api/v1/approvals", json=approval_body(**extra))
        except Exception:
            status, body = 0, None
        if status != 201:
            self.totals.submit_errors += 1  # B went away under it: the agent's client would retry
            server = self.a
            status, body = await self.client.api("POST", server.url + "/api/v1/approvals", json=approval_body(**extra))
            if status != 201:
                return
        request_id = body["id"]
        self.totals.submitted += 1
        self.totals.started[request_id] = time.monotonic()
        if not times_out:
            self.spawn(self.person(request_id))
        while True:  # the agent's long-poll, on A
            try:
                status, got = await self.client.api("GET", self.a.url + f"/api/v1/approvals/{request_id}?wait=30")
            except Exception:
                await asyncio.sleep(1)  # the agent's client backs off
                continue
            if status == 200 and got.get("decision"):
                self.totals.outcomes[got["decision"]["outcome"]] += 1
                return

    async def person(self, request_id: str) -> None:
        post = await self.slack.wait_post(request_id, timeout=120)
        await asyncio.sleep(self.rng.uniform(0.5, 5.0))  # a person reading the card
        body = await click_body(request_id, post)
        server = self.pick()
        while True:
            try:
                status, _ = await self.client.send(server.url + "/slack/events", sign(body))
            except Exception:
                status = 0
            if status == 200:
                self.totals.clicked += 1
                return
            self.totals.click_retries += 1  # Slack showed an error: the person clicks again, on A this time
            server = self.a
            await asyncio.sleep(1)

    async def restarts(self, until: float) -> None:
        every = self.args.restart_every * 60
        kill = True
        while time.monotonic() + every < until:
            await asyncio.sleep(every)  # the schedule of the restarts
            self.b_up = False
            assert self.b.proc is not None
            if kill:
                self.b.proc.send_signal(signal.SIGKILL)
                await asyncio.to_thread(self.b.proc.wait)
            else:
                await asyncio.to_thread(self.b.stop)  # SIGTERM: a graceful stop
            await self.b.start()
            self.b_up = True
            self.totals.restarts += 1
            say(f"replica B restarted ({'SIGKILL' if kill else 'SIGTERM'}), pid {self.b.proc.pid}")
            kill = not kill

    async def sample(self, minute: float) -> str:
        cells = [f"{minute:>6.1f}"]
        for server in (self.a, self.b):
            pid = server.proc.pid if server.proc else 0
            try:
                rss, nfd, conns = rss_mib(pid), len(fds(pid)), db_connections(pid, self.db_url)
            except OSError:
                rss, nfd, conns = float("nan"), -1, -1
            tasks = await asyncio_tasks(self.client, server)
            cells.append(f"{rss:>7.1f} {nfd:>5} {tasks if tasks is not None else '-':>6} {conns:>5}")
        t = self.totals
        pending = t.submitted - sum(t.outcomes.values())
        cells.append(f"{t.submitted:>7} {t.outcomes['approved']:>7} {t.outcomes['expired']:>7} {pending:>5} "
                     f"{t.restarts:>3}")
        return " | ".join(cells)

    async def run(self) -> list[str]:
        began = time.monotonic()
        until = began + self.args.minutes * 60
        header = (f"{'minute':>6} | {'A MiB':>7} {'fds':>5} {'tasks':>6} {'db':>5} | {'B MiB':>7} {'fds':>5} "
                  f"{'tasks':>6} {'db':>5} | {'submit':>7} {'approv':>7} {'expired':>7} {'open':>5} {'rst':>3}")
        rows = [header]
        print(header, flush=True)
        loaders = [asyncio.create_task(self.agents(until)), asyncio.create_task(self.restarts(until))]
        rows.append(await self.sample(0.0))
        print(rows[-1], flush=True)
        next_sample = began + self.args.sample_seconds
        while time.monotonic() < until:
            await asyncio.sleep(max(0.0, min(next_sample, until) - time.monotonic()))  # the sampling schedule
            if time.monotonic() >= next_sample:
                rows.append(await self.sample((time.monotonic() - began) / 60))
                print(rows[-1], flush=True)
                next_sample += self.args.sample_seconds
        for task in loaders:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return rows

    async def settle(self, grace: float = 60.0) -> None:
        """Until every request submitted has its outcome, or `grace` s (the last timeouts take 20 s)."""
        deadline = time.monotonic() + grace
        while self.tasks and time.monotonic() < deadline:
            await asyncio.sleep(0.5)  # waiting for the load's own tasks to finish
        for task in list(self.tasks):
            task.cancel()

    async def audit(self) -> tuple[int, int, int]:
        """(requests decided once, decided more than once, submitted and never decided), from the database."""
        store = await open_store(self.db_url)
        try:
            async with store.engine.connect() as conn:
                rows = (await conn.execute(sa.select(audit_events.c.request_id, sa.func.count())
                                           .where(audit_events.c.type == "decided")
                                           .group_by(audit_events.c.request_id))).all()
        finally:
            await store.close()
        counts = {r: n for r, n in rows}
        once = sum(1 for r in self.totals.started if counts.get(r) == 1)
        doubled = sum(1 for r in self.totals.started if counts.get(r, 0) > 1)
        lost = sum(1 for r in self.totals.started if r not in counts)
        return once, doubled, lost


async def run(args: argparse.Namespace, command: str) -> None:
    with tempfile.TemporaryDirectory(prefix="signoff-soak-") as tmp:
        workdir = Path(tmp)
        async with scratch_database(args.db, pg_url=args.pg_url, workdir=workdir) as db_url:
            slack = InProcessSlack()
            await slack.start()
            servers = [signoff_server(name, db_url, slack.url, workdir) for name in ("soak-a", "soak-b")]
            for server in servers:
                server.env.update({"SIGNOFF_SWEEP_SECONDS": "2", "SIGNOFF_SLACK_CHANNEL_PACE_SECONDS": "0",
                                   "SIGNOFF_LOG_LEVEL": "WARNING", "SIGNOFF_EGRESS_ALLOW": "127.0.0.1"})
            a, b = servers
            soak = Soak(args, db_url, slack, a, b)
            load = os.getloadavg()[0]
            try:
                await asyncio.gather(a.start(), b.start())
                say(f"{args.db}: A pid {a.proc.pid if a.proc else '?'}, B pid {b.proc.pid if b.proc else '?'}; "
                    f"{args.rate:g} requests/s for {args.minutes:g} min")
                await soak.run()
                await soak.settle()
                once, doubled, lost = await soak.audit()
            except Exception:
                for server in servers:
                    if server.log_path.exists():
                        print(f"--- {server.log_path} (tail)\n{server.log_path.read_text()[-3000:]}", file=sys.stderr)
                raise
            finally:
                await soak.client.close()
                for server in servers:
                    server.stop()
                await slack.stop()
            t = soak.totals
            print()
            print(f"command: {command}")
            print(f"host: {os.cpu_count()} CPUs, load average {load:.1f} before / {os.getloadavg()[0]:.1f} after")
            print(f"{t.submitted} requests submitted ({t.submit_errors} submits B refused while restarting, sent to A), "
                  f"{t.clicked} clicks acked ({t.click_retries} clicks again after an error), {t.restarts} restarts of B; "
                  f"outcomes {dict(t.outcomes)}")
            print(f"from the database: {once} decided once, {doubled} decided more than once, {lost} never decided")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--pg-url", default=os.environ.get("SIGNOFF_BENCH_PG_URL", DEFAULT_PG_URL),
                        help="admin URL; a scratch database is made next to it")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=1.0, help="requests per second, all agents together")
    parser.add_argument("--restart-every", type=float, default=10.0, help="minutes between restarts of replica B")
    parser.add_argument("--sample-seconds", type=float, default=60.0)
    parser.add_argument("--timeout", default="20s", help="the timeout of the requests nobody clicks")
    args = parser.parse_args(argv)
    if min(args.minutes, args.rate, args.restart_every, args.sample_seconds) <= 0:
        parser.error("--minutes, --rate, --restart-every and --sample-seconds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    given = sys.argv[1:] if argv is None else argv
    asyncio.run(run(args, " ".join(["python -m bench.soak", *(shlex.quote(a) for a in given)])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
