"""Instructions per approval: an A/B figure that does not move with the machine's speed.

    python -m bench.instructions [--db sqlite|postgres] [--n 50] [--warm 10] [--pg-url URL] [--flow-of hook]

CPU seconds per approval (bench.all, bench.stages) moved by a third between runs on the same shared
machine, more than most single changes save. Valgrind's cachegrind counts the instructions a process
runs instead, which the machine's speed does not change. So to compare two versions of the code:

- One process holds the whole flow: Signoff (bench.harness.start_app: the same app `signoff serve`
  builds, Slack's channel pace off), the fake Slack Web API, and the agent's HTTP client.
- Approvals run one after another, so none shares a transaction with another: submit; the agent
  long-polls; the card is posted; a signed Approve click; the long-poll answers "approved"; the card
  is updated.
- The flow runs twice under cachegrind, with `--warm` and `--warm + --n` approvals. The difference
  divided by `--n` is printed, so start-up and shutdown cancel out.

The count includes the bench's own side (the client, signing, the fake's handling of the two Slack
calls), which stays the same between two versions of Signoff's code. On PostgreSQL the database
server's own work is another process and is not counted.

What runs on a timer would count in proportion to the wall clock, which valgrind stretches about
fiftyfold (and a busy machine further): so in the flow the SQLite cross-process check is off
(bot.approvals.foreign_changes.SQLITE_CHECK_SECONDS; it looks every 20 ms while a long-poll waits) and the outbox's,
the timers' and the agent runs' sweeps run hourly (with them every 5-15 s, a test suite running
beside the count added 10 % per approval). The fake parses no card's blocks (by default it parses
the first 20 messages', which counted unevenly between two `--warm` sizes). Repeated counts agree
within about 2 %, also on a busy machine.

`--flow-of hook` counts instead a Claude Code HTTP hook call that policy allows (bench.hooks' call, one
after another), and beside it the floor: the bare aiohttp handler that checks the token and INSERTs one
row (bench/bare_insert.py), in a process of its own with the same client. Both sides' counts include the
client's work, which is the same for both.

Needs valgrind (Debian: `apt-get install valgrind`); each count takes a minute or two. With `--flow N`
the flow runs N approvals once, natively, and prints nothing but a line (what the counts run).
No figure is asserted anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from bench.core import DEFAULT_PG_URL, say

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")


async def flow(db_url: str, n: int) -> None:
    """`n` sequential approvals through the in-process app (see the module docstring)."""
    import bot.approvals.foreign_changes
    from bench.fake_slack import BenchSlack
    from bench.harness import approval_body, start_app
    from bench.load import Client, click_body, sign

    bot.approvals.foreign_changes.SQLITE_CHECK_SECONDS = 3600.0  # in-process wake-ups only (the module docstring says why)
    slack = BenchSlack()
    slack.block_check_every = 0  # no card's blocks parsed (the module docstring says why)
    await slack.start()
    # The sweeps that run on a timer: hourly (the module docstring says why).
    app = await start_app(db_url, slack, SIGNOFF_SLACK_CHANNEL_PACE_SECONDS="0", SIGNOFF_OUTBOX_SWEEP_SECONDS="3600",
                          SIGNOFF_SWEEP_SECONDS="3600", SIGNOFF_RUN_SWEEP_SECONDS="3600",
                          SIGNOFF_SLACK_INBOX_LEASE_SECONDS="3600")
    client = Client()
    try:
        for _ in range(n):
            status, body = await client.api("POST", app.url + "/api/v1/approvals", json=approval_body())
            if status != 201:
                raise RuntimeError(f"submit answered {status}: {body}")
            request_id = body["id"]
            waiting = asyncio.create_task(client.api("GET", f"{app.url}/api/v1/approvals/{request_id}?wait=30"))
            post = await slack.wait_post(request_id)
            updated = slack.next_update(post.ts)
            status, _ = await client.send(app.url + "/slack/events", sign(await click_body(request_id, post)))
            _, final = await waiting
            if status != 200 or final.get("status") != "approved":
                raise RuntimeError(f"approval {request_id}: click {status}, request {final.get('status')}")
            await asyncio.wait_for(updated.wait(), 30)
    finally:
        await client.close()
        await app.stop()
        await slack.stop()


async def hook_flow(db_url: str, n: int) -> None:
    """`n` policy-allowed calls through the HTTP hook of the in-process app, one after another."""
    import uuid

    import bot.approvals.foreign_changes
    from bench.fake_slack import BenchSlack
    from bench.harness import start_app
    from bench.hooks import HOOK, POLICY, call
    from bench.load import Client

    bot.approvals.foreign_changes.SQLITE_CHECK_SECONDS = 3600.0
    slack = BenchSlack()
    await slack.start()
    with tempfile.TemporaryDirectory(prefix="signoff-instr-hook-") as tmp:
        (Path(tmp) / "policy.yaml").write_text(POLICY)
        # Under valgrind a first call's checks can pass the inline time budget and go to a worker process,
        # whose start takes seconds there: a budget it has time for (both counts make that first call).
        app = await start_app(db_url, slack, SIGNOFF_POLICY=str(Path(tmp) / "policy.yaml"),
                              SIGNOFF_VALIDATION_BUDGET_MS="60000",
                              SIGNOFF_OUTBOX_SWEEP_SECONDS="3600", SIGNOFF_SWEEP_SECONDS="3600",
                              SIGNOFF_RUN_SWEEP_SECONDS="3600", SIGNOFF_SLACK_INBOX_LEASE_SECONDS="3600")
        client = Client()
        session = uuid.uuid4().hex
        try:
            for i in range(n):
                status, body = await client.api("POST", app.url + HOOK, json=call(session, i, tmp))
                if status != 200 or body["hookSpecificOutput"]["permissionDecision"] != "allow":
                    raise RuntimeError(f"the hook answered {status}: {body}")
        finally:
            await client.close()
            await app.stop()
            await slack.stop()


async def bare_flow(db_path: str, n: int) -> None:
    """`n` calls to the bare INSERT handler (bench/bare_insert.py) in this process, one after another."""
    import uuid

    from aiohttp import web

    from bench.bare_insert import build
    from bench.harness import API_TOKEN
    from bench.hooks import call
    from bench.load import Client

    runner = web.AppRunner(build(db_path, API_TOKEN), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/hook"
    client = Client()
    session = uuid.uuid4().hex
    try:
        for i in range(n):
            status, _ = await client.api("POST", url, json=call(session, i, "/tmp"))
            if status != 200:
                raise RuntimeError(f"the bare handler answered {status}")
    finally:
        await client.close()
        await runner.cleanup()


FLOWS = {"approval": flow, "hook": hook_flow, "bare": bare_flow}


def parse_refs(valgrind_output: str) -> int:
    """The instruction count from cachegrind's summary (`==123== I refs: 5,060,818,072`)."""
    found = re.search(r"I\s+refs:\s+([\d,]+)", valgrind_output)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{valgrind_output[-2000:]}")
    return int(found.group(1).replace(",", ""))


def count(db_url: str, n: int, flow_of: str = "approval") -> int:
    """Instructions of one run of the flow with `n` approvals (or calls) under cachegrind."""
    argv = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
            sys.executable, "-m", "bench.instructions", "--flow", str(n), "--db-url", db_url, "--flow-of", flow_of]
    # The system allocator under valgrind (its own documentation's advice for Python).
    env = {**os.environ, "PYTHONMALLOC": "malloc", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"the flow failed under valgrind:\n{done.stderr[-3000:]}")
    return parse_refs(done.stderr)


async def _scratch_and(engine: str, pg_url: str, work: Callable[[str], T]) -> T:
    from bench.procs import scratch_database

    with tempfile.TemporaryDirectory(prefix="signoff-bench-instr-") as tmp:
        async with scratch_database(engine, pg_url=pg_url, workdir=Path(tmp)) as db_url:
            return await asyncio.to_thread(work, db_url)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--pg-url", default=os.environ.get("SIGNOFF_BENCH_PG_URL", DEFAULT_PG_URL))
    parser.add_argument("--n", type=int, default=50, help="approvals counted (default 50)")
    parser.add_argument("--warm", type=int, default=10, help="approvals in both runs, subtracted (default 10)")
    parser.add_argument("--flow-of", choices=["approval", "hook", "bare"], default="approval",
                        help="what is counted: an approval (default), or an allowed HTTP hook call (hook; the bare "
                             "handler's count is printed beside it)")
    parser.add_argument("--flow", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--db-url", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.flow is not None:  # the inner run, on the database the outer one made
        asyncio.run(FLOWS[args.flow_of](args.db_url, args.flow))
        print(f"{args.flow} approvals" if args.flow_of == "approval" else f"{args.flow} {args.flow_of} calls")
        return 0
    if shutil.which("valgrind") is None:
        print("bench.instructions needs valgrind (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    if args.n < 1 or args.warm < 1:
        parser.error("--n and --warm must be at least 1")
    started = time.monotonic()

    def both(db_url: str, flow_of: str = args.flow_of) -> tuple[int, int]:
        # Natively first: the first run of fresh code writes its .pyc files, which the counts must not include.
        subprocess.run([sys.executable, "-m", "bench.instructions", "--flow", "1", "--db-url", db_url,
                        "--flow-of", flow_of], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True,
                       capture_output=True)
        return count(db_url, args.warm, flow_of), count(db_url, args.warm + args.n, flow_of)

    small, large = asyncio.run(_scratch_and(args.db, args.pg_url, both))
    per = (large - small) / args.n
    what = "approval" if args.flow_of == "approval" else "allowed HTTP hook call"
    say(f"{args.db}: {small:,} instructions with {args.warm} flows, {large:,} with {args.warm + args.n}")
    print(f"command: python -m bench.instructions --db {args.db} --n {args.n} --warm {args.warm} "
          f"--flow-of {args.flow_of}; {time.monotonic() - started:.0f} s")
    print(f"{args.db}: {per / 1e6:.2f} M instructions per {what} (this process: Signoff, the agent's client "
          "and the fake Slack; one at a time)")
    if args.flow_of == "hook":
        with tempfile.TemporaryDirectory(prefix="signoff-instr-bare-") as tmp:
            bare_small, bare_large = both(str(Path(tmp) / "bare.db"), "bare")
        bare = (bare_large - bare_small) / args.n
        print(f"bare INSERT handler: {bare / 1e6:.2f} M instructions per call (the same client); "
              f"the hook is {per / bare:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
