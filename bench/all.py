"""Every figure of the performance issue beside its target, for SQLite and PostgreSQL, in one run.

    python -m bench.all [--db sqlite|postgres|both] [--pg-url URL] [--quick] [--only auto]

`--pg-url` (or SIGNOFF_BENCH_PG_URL) is an admin URL: a scratch database is created next to it and
dropped afterwards. `--quick` shrinks every phase (a smoke run of a minute or so; its figures are not
the issue's). Processes and helpers are bench.core's: `python -m bot serve` on a scratch database, the
fake Slack Web API (bot.sandbox's emulator) in this process, signed Slack requests, agent API calls.

CPU figures are the server process's user+system seconds (/proc/PID/stat) across a phase, divided by
the work done, so other processes on a busy machine do not inflate them the way they inflate wall
clock; the load average is printed beside every engine's figures. Per engine, in this order:

  e2e        `--agents` closed-loop agents: submit -> long-poll -> card posted -> (0.1 s, a person reading
             it) -> click -> approved (`--set look=1`: then GETs until the server has stored the card's
             ts, as the figures before December 1st did: about one GET per approval, its CPU counted).
             CPU per approval; approvals/s; submit -> card posted p50.
  burst      `--burst` pending requests with their cards posted, then one click each from 50 clickers
             at once: decisions/s until every decision is recorded and its card updated; CPU each.
  wake       5 long-poll + click pairs at a time: click -> long-poll returned p50 minus the ack p50.
  auto       a tool the policy allows (risk low, no card): `--agents` agents submitting for
             `--seconds`; requests/s beside the raw committed transactions/s.
  cards      on the second server, with Slack's pace on (1 card/s per channel, the default):
             `--channels` channels each get one request per `--card-interval` s (a little slower than
             Slack's pace) for `--card-seconds`, open loop. Submit -> card posted p50, and the part of
             it beyond Slack's pace (posted minus the later of the submit and the channel's previous
             post + 1 s): what queues inside Signoff.
  raw tx/s   bench.load.tx_rate (small committed INSERTs through storage.stores.open_store) after the server stops.
  pending    `--pending` pending requests written in bulk, a fresh server on them: its RSS (beside a
             fresh server's RSS on the empty database at the start); then `--polls` concurrent
             GET ?wait=30 on those requests: the server's RSS while they wait.
  sweep      bench.sweep.run: one Timers.sweep() over `--due` due rows among `--sweep-pending`.
`--only auto`: only the auto phase and the raw tx/s, on a fresh server (a focused run while working
on the submit path; the other figures print "not measured").
And once: bench.policy's evaluation (1,000 rules, 10,000 grants) per call, CPU p50 / p99.
No figure is asserted anywhere; the test suite only checks that a quick run prints every name.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import random
import shlex
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from bench import policy as policy_bench
from bench import sweep as sweep_bench
from bench.core import DEFAULT_PG_URL, quiet_gc, say
from bench.fake_slack import InProcessSlack
from bench.harness import API_TOKEN, approval_body
from bench.load import (
    Client,
    Signed,
    ack_phase,
    click_body,
    decisions,
    e2e_phase,
    sign,
    submit_many,
    tx_rate,
    wait_cards_stored,
    wait_updates,
    wake_phase,
)
from bench.procs import Server, scratch_database, signoff_server
from bench.spy import Spy, summary
from bot.domain.grants import Grant
from bot.policy.file import parse_policy
from storage.sql import SqlStore
from storage.stores import open_store

# The tier is the policy's: since issue 33 an agent's `risk: low` no longer lowers it, and an allowed
# call above low posts an FYI in the channel, which is another path than the one this phase measures.
POLICY = """\
rules:
  - name: bench-reads
    tool: bench_read
    effect: allow
    tier: low
"""

# The names every run prints, in order (tests/test_bench_all.py checks a quick run prints them all).
FIGURES = (
    "CPU per approval",
    "approvals/s vs raw tx/s",
    "decisions/s after burst",
    "submit -> card posted p50",
    "click -> long-poll - ack p50",
    "timer sweep per due row",
    "policy evaluation p99",
    "auto-allowed/s vs raw tx/s",
    "RSS, fresh server",
    "RSS, pending requests",
    "RSS, concurrent long-polls",
    "RSS, after click burst",
)


@dataclass
class Figures:
    engine: str
    load: list[float] = field(default_factory=list)
    rows: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (value, target)

    def add(self, name: str, value: str, target: str) -> None:
        assert name in FIGURES, name
        self.rows[name] = (value, target)


def rss_mb(server: Server) -> float:
    assert server.proc is not None
    for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def ratio(a: float, b: float) -> str:
    return f"1/{b / a:.1f}" if a > 0 else "0"


async def settle(server: Server, limit: float = 15.0) -> None:
    """Until the server is idle (under 10 ms of CPU in 0.25 s): a fresh process finishes lazy imports in
    the background (the agent SDK), which would otherwise be counted as the first phase's work."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit:
        before = server.cpu_seconds()
        await asyncio.sleep(0.25)
        if server.cpu_seconds() - before < 0.01:
            return


ALLOWED = approval_body(action={"name": "bench_read", "params": {"path": "/srv/a.txt"}}, risk="low", preview=None)


async def submit_allowed(client: Client, url: str) -> None:
    """One submit of a tool call the bench's policy allows (no card), which must come back approved."""
    status, out = await client.api("POST", url + "/api/v1/approvals", json=ALLOWED)
    if status not in (200, 201) or out.get("status") != "approved":
        raise RuntimeError(f"auto-allowed submit: {status} {out}")


async def auto_phase(client: Client, url: str, agents: int, seconds: float) -> tuple[int, float]:
    """(requests policy allowed, seconds): `agents` agents submit an allowed tool call in a closed loop."""
    done = 0

    async def agent() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await submit_allowed(client, url)
            done += 1

    deadline = time.perf_counter() + 0.5
    await asyncio.gather(*(agent() for _ in range(agents)))  # warm-up
    done = 0
    started = time.perf_counter()
    deadline = started + seconds
    await asyncio.gather(*(agent() for _ in range(agents)))
    return done, time.perf_counter() - started


@dataclass
class CardsResult:
    latency: list[float]  # submit sent -> card posted, seconds
    beyond_pace: list[float]  # the part of it Slack's pace does not explain
    missing: int  # requests whose card was not posted within the wait


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(len(ordered) * p / 100 + 0.5) - 1))] * 1000 if ordered else math.nan


async def cards_phase(client: Client, url: str, slack: InProcessSlack, channels: int, seconds: float,
                      interval: float, pace: float = 1.0) -> CardsResult:
    """One agent per channel submits a request every `interval` s for `seconds` (open loop: it does not
    wait for the card); then every card's submit -> posted time, and the part beyond Slack's pace."""
    sent: dict[str, tuple[str, float]] = {}  # request id -> (channel, monotonic submit time)

    async def agent(index: int) -> None:
        channel = f"C{index + 1}"
        body = approval_body(channel=channel)
        await asyncio.sleep(index * interval / channels)  # channels spread over the interval
        started = time.monotonic()
        n = 0
        while time.monotonic() - started < seconds:
            at = time.monotonic()
            status, out = await client.api("POST", url + "/api/v1/approvals", json=body)
            if status != 201:
                raise RuntimeError(f"submit failed: {status} {out}")
            sent[out["id"]] = (channel, at)
            n += 1
            await asyncio.sleep(max(0.0, started + n * interval - time.monotonic()))

    await asyncio.gather(*(agent(i) for i in range(channels)))
    missing = 0
    for request_id in sent:
        try:
            await slack.wait_post(request_id, timeout=30)
        except TimeoutError:
            missing += 1
    posts = await slack.posts()
    latency, beyond = [], []
    last_post: dict[str, float] = {}
    for request_id, (channel, at) in sorted(sent.items(), key=lambda kv: kv[1][1]):
        post = posts.get(request_id)
        if post is None:
            continue
        latency.append(post.at - at)
        free = last_post.get(channel, -math.inf) + pace  # Slack's pace: the channel's next slot
        beyond.append(post.at - max(at, free))
        last_post[channel] = post.at
    return CardsResult(latency, beyond, missing)


async def polls_rss(url: str, server: Server, ids: list[str], settle: float) -> tuple[float, int]:
    """Peak RSS (MB) while one long-poll per id waits; (rss, polls that returned early)."""
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                    headers={"Authorization": f"Bearer {API_TOKEN}"})

    async def poll(request_id: str) -> None:
        async with session.get(f"{url}/api/v1/approvals/{request_id}?wait=30") as resp:
            await resp.read()

    tasks = [asyncio.create_task(poll(r)) for r in ids]
    peak, started = 0.0, time.perf_counter()
    try:
        while time.perf_counter() - started < settle:  # sampling RSS while the waiters are held
            await asyncio.sleep(0.1)
            peak = max(peak, rss_mb(server))
        early = sum(t.done() for t in tasks)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await session.close()
    return peak, early


def spying(server: Server, args: argparse.Namespace, phase: str) -> contextlib.AbstractContextManager[object]:
    """With --profile DIR: py-spy samples the server during the phase into DIR/PHASE.folded."""
    if args.profile is None or server.proc is None:
        return contextlib.nullcontext()
    args.profile.mkdir(parents=True, exist_ok=True)
    return Spy(server.proc.pid, args.profile / f"{phase}.folded")


def policy_server(name: str, db_url: str, slack: InProcessSlack, workdir: Path) -> Server:
    """`python -m bot serve` on `db_url` under the bench's policy file (bench_read allowed, no card)."""
    policy_path = workdir / "policy.yaml"
    policy_path.write_text(POLICY)
    server = signoff_server(name, db_url, slack.url, workdir)
    server.env["SIGNOFF_POLICY"] = str(policy_path)
    return server


@contextlib.asynccontextmanager
async def running_server(name: str, db_url: str, slack: InProcessSlack, workdir: Path, *,
                         pace: bool = False, warm: int = 3) -> AsyncIterator[tuple[Server, Client]]:
    """`policy_server` started, its first `warm` submits sent (they load what a fresh process loads
    lazily) and idle again, with a client; both closed at the end. Slack's pace is off unless `pace`:
    with every card in one channel (C1) it would be the only figure measured."""
    server = policy_server(name, db_url, slack, workdir)
    if not pace:
        server.env["SIGNOFF_SLACK_CHANNEL_PACE_SECONDS"] = "0"
    client = Client()
    try:
        await server.start()
        await submit_many(client, server.url, warm, min(warm, 5))
        await settle(server)
        yield server, client
    finally:
        await client.close()
        server.stop()


def add_auto(fig: Figures, rate: float, tx_per_s: float, cpu_ms: float) -> None:
    fig.add("auto-allowed/s vs raw tx/s", f"{rate:.0f} vs {tx_per_s:.0f} ({ratio(rate, tx_per_s)}; "
            f"{cpu_ms:.2f} ms CPU each)", ">= 1/2")


async def auto_only(engine: str, args: argparse.Namespace, workdir: Path) -> Figures:
    """`--only auto`: a fresh server, the auto phase, then the raw tx/s of the same database."""
    fig = Figures(engine, [os.getloadavg()[0]])
    async with scratch_database(engine, pg_url=args.pg_url, workdir=workdir) as db_url:
        async with InProcessSlack() as slack, \
                running_server(f"auto-{engine}", db_url, slack, workdir, pace=True) as (server, client):
            cpu = server.cpu_seconds()
            with spying(server, args, f"{engine}-auto"):
                allowed, auto_s = await auto_phase(client, server.url, args.agents, args.seconds)
            cpu_auto = (server.cpu_seconds() - cpu) / max(1, allowed) * 1000
        tx_per_s, _ = await tx_rate(db_url, args.agents, seconds=args.tx_seconds)
    add_auto(fig, allowed / auto_s, tx_per_s, cpu_auto)
    fig.load.append(os.getloadavg()[0])
    return fig


async def run_engine(engine: str, args: argparse.Namespace, workdir: Path) -> Figures:
    if args.only == "auto":
        return await auto_only(engine, args, workdir)
    fig = Figures(engine, [os.getloadavg()[0]])
    c = args.agents
    async with scratch_database(engine, pg_url=args.pg_url, workdir=workdir) as db_url:
        slack = InProcessSlack()
        await slack.start()
        # Slack's pace off: these phases measure Signoff's own costs.
        async with running_server(f"all-{engine}", db_url, slack, workdir) as (server, client):
            fig.add("RSS, fresh server", f"{rss_mb(server):.0f} MB", "baseline for the RSS rows")

            # -- e2e ---------------------------------------------------------------------------------
            quiet_gc()
            cpu, own = server.cpu_seconds(), time.process_time()
            with spying(server, args, f"{engine}-e2e"):
                e2e = await e2e_phase(client, server.url, slack, c, args.seconds, look=bool(args.look))
            cpu_approval = (server.cpu_seconds() - cpu) / max(1, e2e.completed) * 1000
            bench_approval = (time.process_time() - own) / max(1, e2e.completed) * 1000
            say(f"{engine}: e2e {e2e.approvals} approvals, {e2e.rate:.1f}/s, {cpu_approval:.1f} ms CPU each "
                f"({e2e.card_gets / max(1, e2e.approvals):.1f} GETs per approval while waiting for the card's ts)")
            say(f"{engine}: e2e the bench's own CPU (agents, signing, fake Slack) {bench_approval:.1f} ms per approval: "
                f"{os.cpu_count()} CPUs carry at most {1000 * (os.cpu_count() or 1) / (cpu_approval + bench_approval):.0f} "
                f"approvals/s of server and bench together; one server process at most {1000 / cpu_approval:.0f}/s")

            # -- burst of clicks, and the wake pairs ---------------------------------------------------
            n_wake = args.wake
            ids, _ = await submit_many(client, server.url, args.burst + n_wake, c)
            for request_id in ids:  # first until Slack has every card (no load on the server), then their ts
                await slack.wait_post(request_id, timeout=600)
            await wait_cards_stored(client, server.url, ids, timeout=600)
            posts = await slack.posts()
            burst_ids, wake_ids = ids[:args.burst], ids[args.burst:]
            bodies = {r: await click_body(r, posts[r]) for r in burst_ids + wake_ids}
            updates = (await slack.counts()).get("chat.update", 0)
            before = await decisions(client, server.url)
            quiet_gc()
            cpu, started = server.cpu_seconds(), time.perf_counter()
            with spying(server, args, f"{engine}-burst"):
                acks = await ack_phase(client, server.url + "/slack/events", [sign(bodies[r]) for r in burst_ids], 50)
                waited_from = time.perf_counter()
                # Until the last card update arrived (wait_updates then waits for quiet: not counted).
                burst_s = waited_from - started + await wait_updates(slack, updates + args.burst)
            cpu_decision = (server.cpu_seconds() - cpu) / args.burst * 1000
            decided = await decisions(client, server.url) - before
            fig.add("RSS, after click burst", f"{rss_mb(server):.0f} MB", "no growth with the burst")
            fig.add("decisions/s after burst", f"{decided / burst_s:.0f}/s ({cpu_decision:.1f} ms CPU each; "
                    f"{decided} of {args.burst} decided; the clicks' acks p50 {acks.latency.p50:.1f} ms, "
                    f"p99 {acks.latency.p99:.1f})", ">= 400/s")
            pairs: list[tuple[str, Signed]] = [(r, sign(bodies[r])) for r in wake_ids]
            wake = await wake_phase(client, server.url, server.url, pairs, 5)
            fig.add("click -> long-poll - ack p50", f"{wake.wake.p50 - wake.ack.p50:+.1f} ms (wake p50 "
                    f"{wake.wake.p50:.1f}, ack p50 {wake.ack.p50:.1f}; e2e under load {e2e.wake.p50 - e2e.ack.p50:+.1f})",
                    "<= +3 ms")

            # -- auto-allowed path, then long-polls --------------------------------------------------
            cpu = server.cpu_seconds()
            with spying(server, args, f"{engine}-auto"):
                allowed, auto_s = await auto_phase(client, server.url, c, args.seconds)
            cpu_auto = (server.cpu_seconds() - cpu) / max(1, allowed) * 1000
        tx_per_s, _ = await tx_rate(db_url, c, seconds=args.tx_seconds)
        gets = f"the bench's GETs for the card ts included: {e2e.card_gets / max(1, e2e.approvals):.1f} per approval" \
            if args.look else "no GETs: the click comes 0.1 s after Slack shows the card"
        fig.add("CPU per approval", f"{cpu_approval:.1f} ms ({gets})", "<= 6 ms")
        fig.add("approvals/s vs raw tx/s", f"{e2e.rate:.1f} vs {tx_per_s:.0f} ({ratio(e2e.rate, tx_per_s)})",
                ">= 1/5")
        say(f"{engine}: e2e submit -> card posted p50 {e2e.card.p50:.0f} ms, p99 {e2e.card.p99:.0f} ({c} closed-loop "
            "agents, one channel, pace off: the server's queue at saturation, not a figure of the issue)")
        add_auto(fig, allowed / auto_s, tx_per_s, cpu_auto)

        # -- a fresh server on many pending requests ------------------------------------------------
        store = await open_store(db_url)
        try:
            await sweep_bench._fill(store, args.pending, 0)
        finally:
            await store.close()
        again = signoff_server(f"all-{engine}-pending", db_url, slack.url, workdir)
        # Slack's pace on (the default, 1 s per channel): the cards phase measures Signoff beside it.
        again.env["SIGNOFF_LONGPOLL_PER_TOKEN"] = again.env["SIGNOFF_LONGPOLL_MAX"] = str(2 * args.polls)
        client = Client()
        try:
            await again.start()
            await submit_many(client, again.url, 3, 3)
            await settle(again)
            fig.add("RSS, pending requests", f"{rss_mb(again):.0f} MB ({args.pending:,} pending)",
                    "= fresh server (only the database grows)")
            poll_ids = [f"apr_bench{n:021d}" for n in range(args.polls)]  # pending rows bench.sweep wrote
            peak, early = await polls_rss(again.url, again, poll_ids, args.poll_settle)
            fig.add("RSS, concurrent long-polls", f"{peak:.0f} MB ({args.polls} waiting, {early} returned early)",
                    "no growth per waiter beyond its socket")
            cards = await cards_phase(client, again.url, slack, args.channels, args.card_seconds, args.card_interval)
            fig.add("submit -> card posted p50",
                    f"{pct(cards.latency, 50):.0f} ms (p99 {pct(cards.latency, 99):.0f}); beyond Slack's pace "
                    f"p50 {pct(cards.beyond_pace, 50):.0f} ms, p99 {pct(cards.beyond_pace, 99):.0f} "
                    f"({len(cards.latency)} cards, {args.channels} channels at 1 per {args.card_interval:g} s"
                    f"{f', {cards.missing} not posted' if cards.missing else ''})",
                    "Slack's pace only (1 card/s per channel)")
        finally:
            await client.close()
            again.stop()
            await slack.stop()

    sweep = await sweep_bench.run("postgresql" if engine == "postgres" else "sqlite", args.sweep_pending, args.due,
                                  args.pg_url, args.sweep_repeat)
    median, cpu = sweep["times"][len(sweep["times"]) // 2], sweep["cpus"][len(sweep["cpus"]) // 2]
    fig.add("timer sweep per due row", f"{median * 1e6 / args.due:.0f} µs ({cpu * 1e6 / args.due:.0f} µs CPU; "
            f"{args.due} due among {args.sweep_pending:,}, {sweep['rounds']} rounds)", "<= 150 µs")
    fig.load.append(os.getloadavg()[0])
    return fig


def policy_figure(args: argparse.Namespace) -> tuple[str, str]:
    rng = random.Random(7)
    text = policy_bench.policy_text(args.rules, 100, rng)
    policy = parse_policy(text, "bench.yaml")
    pool = policy_bench.grants(args.grants, 100, rng)
    by_tool: dict[str, list[Grant]] = {}
    for g in pool:
        by_tool.setdefault(g.tool, []).append(g)
    _, cpu = policy_bench.timed(policy, policy_bench.calls(args.calls, 100, rng, pool), by_tool, build=False)
    ordered = sorted(cpu)
    p50, p99 = ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.99)]
    return (f"{p99:.0f} µs CPU (p50 {p50:.0f}; {args.rules} rules, {args.grants} grants, {args.calls} calls)",
            "< 1 ms p99")


def report(results: list[Figures], policy: tuple[str, str], command: str) -> None:
    print()
    print(f"command: {command}")
    print(f"host: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    for r in results:
        r.rows["policy evaluation p99"] = policy
        print(f"\n{r.engine} (load average {r.load[0]:.1f} at start, {r.load[-1]:.1f} at end)")
        print(f"  {'figure':<30} {'target':<42} measured")
        for name in FIGURES:
            value, target = r.rows.get(name, ("not measured", "-"))
            print(f"  {name:<30} {target:<42} {value}")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.all", description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--pg-url", default=os.environ.get("SIGNOFF_BENCH_PG_URL", DEFAULT_PG_URL))
    parser.add_argument("--profile", type=Path, default=None,
                        help="py-spy (pip install py-spy) samples the server in the e2e, burst and auto phases "
                             "into DIR/ENGINE-PHASE.folded; their top entries are printed at the end")
    parser.add_argument("--quick", action="store_true", help="small phases: a smoke run, not the issue's figures")
    parser.add_argument("--only", choices=["auto"], default=None,
                        help="only the auto-allowed phase and the raw tx/s (the other figures: not measured)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=N",
                        help="override one phase size, e.g. --set burst=300 --set seconds=4 (names: see parse())")
    args = parser.parse_args(argv)
    sizes: dict[str, float] = dict(agents=50, seconds=8.0, burst=1000, wake=50, polls=1000, poll_settle=3.0, pending=100_000,
                 sweep_pending=10_000, due=1000, sweep_repeat=3, rules=1000, grants=10_000, calls=5000,
                 tx_seconds=3.0, channels=50, card_seconds=8.0, card_interval=1.1, look=0)
    if args.quick:
        sizes = dict(agents=5, seconds=1.0, burst=50, wake=5, polls=20, poll_settle=0.5, pending=500,
                     sweep_pending=300, due=30, sweep_repeat=1, rules=50, grants=200, calls=200, tx_seconds=0.5,
                     channels=5, card_seconds=1.0, card_interval=1.1, look=0)
    for item in args.set:
        key, _, value = item.partition("=")
        if key not in sizes:
            parser.error(f"--set {item}: no phase size {key!r} (one of {', '.join(sizes)})")
        sizes[key] = type(sizes[key])(float(value))
    for key, value in sizes.items():
        setattr(args, key, value)
    return args


async def main_async(args: argparse.Namespace, command: str) -> None:
    engines = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    results = []
    with tempfile.TemporaryDirectory(prefix="signoff-bench-all-") as tmp:
        for engine in engines:
            results.append(await run_engine(engine, args, Path(tmp)))
    report(results, policy_figure(args) if args.only is None else ("not measured", "< 1 ms p99"), command)
    if args.profile is not None:
        for path in sorted(args.profile.glob("*.folded")):
            print(f"\nprofile {path.stem}: {summary(path, 15)}")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    given = sys.argv[1:] if argv is None else argv
    asyncio.run(main_async(args, " ".join(["python -m bench.all", *(shlex.quote(a) for a in given)])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
