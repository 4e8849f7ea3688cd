"""Where an approval's server CPU goes: the same work as bench.all's e2e phase, one stage at a time.

    python -m bench.stages [--db sqlite|postgres] [--n 1000] [--rounds 2] [--backlog 1500] [--pg-url URL]
                           [--profile DIR]

`python -m bot serve` on a scratch database, the fake Slack Web API in this process (bench.core's
set-up, Slack's channel pace off). Per round, the server's CPU (user + system, /proc) divided by `--n`:

  submit + card    `--n` submits from 50 agents (POST /api/v1/approvals), until Slack has every card and
                   the server is idle again: the submit, the outbox's claim, the card's rendering, its
                   chat.postMessage and the unit that stores its ts.
  submit, no card  `--n` submits of a tool the bench's policy allows (bench.all's auto-allowed path):
                   the submit alone, no card, no outbox.
  GET              one plain GET /api/v1/approvals/{id} per request (what a long-poll costs without its wait).
  click            one signed Approve click per request from 50 clickers, until every card was updated
                   and the server is idle: Bolt's ack, the check, the decision's write, the waiter's
                   wake-up, and the card update (claim, rendering, chat.update, done mark).

An e2e approval is about submit + card, one GET and one click (bench.all's "CPU per approval").

  backlog          then, on a second server with Slack's pace on (1 card/s per channel, the default):
                   `--backlog` submits into one channel at once; after 4 s (their first put-backs),
                   the server's CPU and the cards posted over 5 s. The queue waits at Slack's pace and
                   costs nothing while it does (it cost 60-75 % of a core for 1,500 cards before
                   bot/slack/pace.py queued them).
`--profile DIR`: py-spy samples each stage into DIR/ENGINE-STAGE-ROUND.folded (`python -m bench.spy FILE`).
No figure is asserted anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import tempfile
import time
from pathlib import Path

from bench.all import running_server, settle, spying, submit_allowed
from bench.core import DEFAULT_PG_URL, quiet_gc, say
from bench.fake_slack import InProcessSlack
from bench.load import Client, ack_phase, click_body, run_workers, shares, sign, submit_many, wait_cards_stored, \
    wait_updates
from bench.procs import Server, scratch_database

AGENTS = 50


async def _gets(client: Client, url: str, ids: list[str]) -> None:
    async def getter(chunk: list[str]) -> None:
        for request_id in chunk:
            status, body = await client.api("GET", f"{url}/api/v1/approvals/{request_id}")
            if status != 200:
                raise RuntimeError(f"GET {request_id}: {status} {body}")

    await run_workers([lambda chunk=chunk: getter(chunk) for chunk in shares(ids, AGENTS)])


async def one_round(server: Server, client: Client, slack: InProcessSlack, n: int, args: argparse.Namespace,
                    tag: str) -> dict[str, float]:
    """Server CPU per request (ms) of each stage."""
    figures: dict[str, float] = {}
    quiet_gc()
    cpu = server.cpu_seconds()
    with spying(server, args, f"{tag}-submit"):
        ids, _ = await submit_many(client, server.url, n, AGENTS)
        for request_id in ids:
            await slack.wait_post(request_id, timeout=600)
        await settle(server)
    figures["submit + card"] = (server.cpu_seconds() - cpu) / n * 1000
    await wait_cards_stored(client, server.url, ids)  # (not counted: the bench's own polling)

    await settle(server)
    cpu = server.cpu_seconds()
    with spying(server, args, f"{tag}-get"):
        await _gets(client, server.url, ids)
    figures["GET"] = (server.cpu_seconds() - cpu) / n * 1000

    async def allowed(count: int) -> None:
        for _ in range(count):
            await submit_allowed(client, server.url)

    await settle(server)
    cpu = server.cpu_seconds()
    with spying(server, args, f"{tag}-allowed"):
        await run_workers([lambda count=len(chunk): allowed(count) for chunk in shares(ids, AGENTS)])
    figures["submit, no card"] = (server.cpu_seconds() - cpu) / n * 1000

    posts = await slack.posts()
    bodies = [sign(await click_body(r, posts[r])) for r in ids]
    updates = (await slack.counts()).get("chat.update", 0)
    await settle(server)
    quiet_gc()
    cpu = server.cpu_seconds()
    with spying(server, args, f"{tag}-click"):
        await ack_phase(client, server.url + "/slack/events", bodies, AGENTS)
        await wait_updates(slack, updates + n, timeout=600)
        await settle(server)
    figures["click"] = (server.cpu_seconds() - cpu) / n * 1000
    return figures


async def run(engine: str, args: argparse.Namespace) -> list[dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="signoff-stages-") as tmp:
        workdir = Path(tmp)
        async with scratch_database(engine, pg_url=args.pg_url, workdir=workdir) as db_url, InProcessSlack() as slack, \
                running_server(f"stages-{engine}", db_url, slack, workdir, warm=20) as (server, client):
            rounds = []
            for number in range(args.rounds):
                figures = await one_round(server, client, slack, args.n, args, f"{engine}-{number}")
                say(f"{engine} round {number + 1}: " + "; ".join(f"{k} {v:.2f} ms" for k, v in figures.items()))
                rounds.append(figures)
            return rounds


async def backlog(engine: str, args: argparse.Namespace) -> tuple[float, float]:
    """(share of a core the server used, cards posted per second) while `--backlog` cards wait in one channel."""
    with tempfile.TemporaryDirectory(prefix="signoff-backlog-") as tmp:
        workdir = Path(tmp)
        async with scratch_database(engine, pg_url=args.pg_url, workdir=workdir) as db_url, InProcessSlack() as slack, \
                running_server(f"backlog-{engine}", db_url, slack, workdir, pace=True) as (server, client):
            await submit_many(client, server.url, args.backlog, AGENTS)
            await asyncio.sleep(4)
            cpu, posted = server.cpu_seconds(), (await slack.counts()).get("chat.postMessage", 0)
            await asyncio.sleep(5)
            share = (server.cpu_seconds() - cpu) / 5
            rate = ((await slack.counts()).get("chat.postMessage", 0) - posted) / 5
            return share, rate


def report(engine: str, rounds: list[dict[str, float]]) -> None:
    print(f"{engine}: server CPU per request, ms ({len(rounds)} rounds; min / median / max)")
    for name in rounds[0]:
        values = sorted(r[name] for r in rounds)
        print(f"  {name:<16} {values[0]:.2f} / {values[len(values) // 2]:.2f} / {values[-1]:.2f}")
    total = sorted(r["submit + card"] + r["GET"] + r["click"] for r in rounds)
    print(f"  {'sum':<16} {total[0]:.2f} / {total[len(total) // 2]:.2f} / {total[-1]:.2f}  "
          "(about an e2e approval: submit + card, one GET, one click)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stages", description=__doc__.split("\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pg-url", default=os.environ.get("SIGNOFF_BENCH_PG_URL", DEFAULT_PG_URL))
    parser.add_argument("--backlog", type=int, default=1500)
    parser.add_argument("--profile", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rounds = asyncio.run(run(args.db, args))
    share, rate = asyncio.run(backlog(args.db, args)) if args.backlog else (math.nan, math.nan)
    print(f"command: python -m bench.stages --db {args.db} --n {args.n} --rounds {args.rounds} --backlog "
          f"{args.backlog}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}; "
          f"{time.perf_counter() - started:.0f} s")
    report(args.db, rounds)
    if args.backlog:
        print(f"  backlog: {args.backlog} cards waiting in one channel: the server used {100 * share:.0f} % of a core "
              f"while {rate:.1f} cards/s went out (Slack's pace: 1/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
