"""The SQL statements one pending submit (POST /api/v1/approvals, a card to post) sends, printed.

    python -m bench.statements --db sqlite
    python -m bench.statements --db postgres --pg-url postgresql://postgres:postgres@127.0.0.1:5432/postgres

Signoff in this process on a fresh database, the sandbox's Slack emulator, U1 has opened App Home
(so the submit enqueues a Home refresh). A few warm-up submits first; then every statement the
submit's HTTP request sends to the database (on PostgreSQL each is a round trip) until it answered,
from an SQLAlchemy `before_cursor_execute` listener on both engines. The outbox's own work (posting
the card) is left out: it starts after the submit's unit committed, and this waits for it to finish
before counting the next submit.

`--cpu N`: then the CPU of a pending submit in-process, through `Service.submit` as the API calls it
(3 rounds of N after 100 warm-up, no HTTP, the outbox not running): the submit path's own cost.

    python -m bench.statements --db sqlite --cpu 1000
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from sqlalchemy import event

from bench.harness import API_TOKEN, approval_body, settings_for, start_app
from bench.procs import scratch_database
from bot.domain.model import Action, Risk
from bot.sandbox import SlackEmulator
from bot.approvals.service import ApprovalSpec
from bot.process.app import build
from bot.process.lifecycle import SIGNOFF
from storage.sql import SqlStore
from storage.stores import open_store


async def count(db_url: str, submits: int, *, show: bool) -> list[int]:
    slack = SlackEmulator()
    await slack.start()
    slack.add_channel("C1", "approvals")
    store = await open_store(db_url)
    app = await start_app(db_url, slack, store=store)
    signoff, url = app.runner.app[SIGNOFF], app.url
    seen: list[str] | None = None

    def add(statement: str) -> None:
        if seen is not None:
            seen.append(" ".join(statement.split())[:110])

    # Every statement the store sends (`SqlStore.watch`): on PostgreSQL both pools' (SQLAlchemy's cursor
    # events, storage/postgres/raw.py's), on SQLite the writer's own sqlite3 trace (its driver SQL, BEGIN
    # IMMEDIATE and COMMIT too) and the read engine's cursor events. PostgreSQL's BEGIN and COMMIT come
    # from the transaction events (asyncpg sends them itself); the read engine is an OptionEngine of the
    # write engine there, whose events it already fires.
    postgres = store.dialect == "postgresql"

    def begin(conn: Any) -> None:
        if conn.get_execution_options().get("isolation_level") != "AUTOCOMMIT":  # a read sends no BEGIN
            add("BEGIN")

    engine = store.write_engine.sync_engine
    hooks: list[tuple[Any, str, Any]] = [(engine, "begin", begin), (engine, "commit", lambda _c: add("COMMIT"))] \
        if postgres else []
    for target, name, fn in hooks:
        event.listen(target, name, fn)
    unwatch = store.watch(add)
    # The outbox's claim of the card is woken after the commit, beside the response: not the submit's.
    listeners = store.__dict__.get("_outbox_listeners", [])
    counts = []
    headers = {"Authorization": f"Bearer {API_TOKEN}"}
    try:
        async with store.unit() as unit:
            await unit.open_home("U1", signoff.service.clock.now())
        async with aiohttp.ClientSession() as session:
            for i in range(3 + submits):
                seen = [] if i >= 3 else None
                store.__dict__["_outbox_listeners"] = [] if seen is not None else listeners
                async with session.post(url + "/api/v1/approvals", json=approval_body(), headers=headers) as resp:
                    assert resp.status == 201, await resp.text()
                    got = await resp.json()
                if seen is not None:
                    counts.append(len(seen))
                    if show and i == 3:
                        print("\n".join(f"  {s}" for s in seen))
                seen = None
                store.__dict__["_outbox_listeners"] = listeners
                signoff.dispatcher.wake()
                await slack.wait_for("chat.postMessage", count=i + 1)
                while True:  # the card's ts stored: the outbox is done with this submit
                    request = await store.get_request(got["id"])
                    if request is not None and request.card_ts:
                        break
                    await asyncio.sleep(0.005)  # bench-side only
    finally:
        for target, name, fn in hooks:
            event.remove(target, name, fn)
        unwatch()
        await app.stop()
        await store.close()
        await slack.stop()
    return counts


async def submit_cpu(db_url: str, n: int) -> list[float]:
    """ms of this process's CPU per `Service.submit` of a pending request, for each of 3 rounds of `n`."""
    slack = SlackEmulator()
    await slack.start()
    signoff = await build(settings_for(db_url, slack))  # not started: no outbox beside the submits
    spec = ApprovalSpec(action=Action("send_email", {"to": "customer@example.com", "subject": "Your refund"}),
                        summary="Send the refund email", risk=Risk.HIGH, channel="C1", approvers=("U1", "U2"),
                        requested_by="support-agent")
    rounds = []
    try:
        for _ in range(100):
            await signoff.service.submit(spec)
        for _ in range(3):
            started = time.process_time()
            for _ in range(n):
                await signoff.service.submit(spec)
            rounds.append((time.process_time() - started) / n * 1000)
    finally:
        await signoff.store.close()
        await slack.stop()
    return rounds


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--pg-url", default="postgresql://postgres:postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--submits", type=int, default=5)
    parser.add_argument("--cpu", type=int, default=0, metavar="N", help="also CPU per Service.submit, 3 rounds of N")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="signoff-bench-stmts-"))
    async with scratch_database(args.db, pg_url=args.pg_url, workdir=workdir) as url:
        counts = await count(url, args.submits, show=True)
    print(f"{args.db}: statements per pending submit: {counts}")
    if args.cpu:
        async with scratch_database(args.db, pg_url=args.pg_url, workdir=workdir) as url:
            rounds = await submit_cpu(url, args.cpu)
        print(f"{args.db}: CPU per Service.submit (pending): {min(rounds):.2f}-{max(rounds):.2f} ms "
              f"(3 rounds of {args.cpu})")


if __name__ == "__main__":
    asyncio.run(main())
