"""CPU and wall time of one person's decision in-process: the Approve click's work without HTTP or Slack.

Submits N requests through the app (cards posted), stops the outbox dispatcher so no delivery runs
beside the decisions, then calls the Approve button's listener (`direct_clicks`) N times in a row:
each is the check read and the decision's unit, as a click does after its ack.

    python -m bench.decision_cost --db postgres --n 300
    python -m bench.decision_cost --db postgres --n 300 --autocommit-units

`--autocommit-units` measures a proposal, not what Signoff does: during the clicks every unit runs on
the AUTOCOMMIT reader engine, so no BEGIN or COMMIT is sent. That is only safe for a unit of ONE
statement (a lone decision on PostgreSQL, storage/postgres/decide.py), which is all that runs here.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bench.harness import start_app
from bench.core import DEFAULT_PG_URL
from bench.procs import scratch_database
from bot.sandbox import SlackEmulator
from bot.slack.payloads import Click
from bot.process.lifecycle import SIGNOFF
from storage.sql import SqlStore, SqlUnit

CHANNELS = 100


def autocommit_units(store: SqlStore) -> None:
    """Units on the AUTOCOMMIT engine: each statement its own transaction (see the module's note)."""

    @asynccontextmanager
    async def unit() -> AsyncIterator[SqlUnit]:
        async with store.engine.connect() as conn:
            made = store.unit_class(conn)
            yield made
        store._finish_unit(made)

    store.unit = unit  # type: ignore[method-assign]


async def run(engine: str, n: int, warmup: int, pg_url: str, *, autocommit: bool = False) -> tuple[float, float]:
    """(CPU ms, wall ms) per decision."""
    with tempfile.TemporaryDirectory(prefix="signoff-bench-decide-") as tmp:
        async with scratch_database(engine, pg_url=pg_url, workdir=Path(tmp)) as url:
            slack = SlackEmulator()
            await slack.start()
            channels = [f"C{i}" for i in range(1, CHANNELS + 1)]
            for channel in channels:
                slack.add_channel(channel, channel.lower())
            slack.add_user("U1", "ann")
            app = await start_app(url, slack)
            try:
                signoff = app.runner.app[SIGNOFF]
                # Cards go out at Slack's pace per channel (~1/s): spread the requests over many channels.
                requests = await asyncio.gather(*(app.submit(channel=channels[i % CHANNELS])
                                                  for i in range(warmup + n)))
                await signoff.dispatcher.stop()  # nothing but the decisions runs from here on
                if autocommit:
                    assert engine == "postgres"
                    autocommit_units(signoff.store)
                approve = signoff.direct_clicks["signoff_approve"]
                clicks = [Click("U1", "ann", "signoff_approve", r["id"], None, r["card"]["channel"], r["card"]["ts"],
                                None) for r in requests]
                for click in clicks[:warmup]:
                    await approve(click)
                cpu, wall = time.process_time(), time.perf_counter()
                for click in clicks[warmup:]:
                    await approve(click)
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                decided = await signoff.store.statuses([r["id"] for r in requests])
                assert all(s.value == "approved" for s in decided.values()), "a click did not decide"
            finally:
                await app.stop()
                await slack.stop()
    return cpu * 1000 / n, wall * 1000 / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument("--pg-url", default=os.environ.get("SIGNOFF_BENCH_PG_URL", DEFAULT_PG_URL))
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--autocommit-units", action="store_true", help="the proposal: see the module's note")
    args = parser.parse_args()
    cpu, wall = asyncio.run(run(args.db, args.n, args.warmup, args.pg_url, autocommit=args.autocommit_units))
    units = " (units on the AUTOCOMMIT engine)" if args.autocommit_units else ""
    print(f"{args.db}{units}: {cpu:.2f} ms CPU, {wall:.2f} ms wall per decision (n={args.n})")


if __name__ == "__main__":
    main()
