"""`signoff langgraph resume`: a `Resumer` (or, with --async, an `AsyncResumer`) from the command line.

    signoff langgraph resume --graph myapp:build_graph --db checkpoints.db
    signoff langgraph resume --graph myapp:build_graph --db postgresql://user:pw@db/agents --lease 120
    signoff langgraph resume --async --graph myapp:build_graph --db checkpoints.db --listen 0.0.0.0:8377

`--db` is a SQLite checkpoint file (SqliteSaver / AsyncSqliteSaver) or a PostgreSQL URL (PostgresSaver /
AsyncPostgresSaver, its tables made by its own `setup()` if missing). `--listen HOST:PORT` starts a
`WebhookReceiver` (it needs SIGNOFF_WEBHOOK_SECRET, the server's) and is woken by Signoff's decision
webhooks instead of long-polls; `--public-url` is how Signoff reaches it when that is not HOST:PORT.
Exit 0 when stopped (Ctrl-C, SIGTERM) or after --once; 2 when it cannot start (the message says why).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from signoff._resume_cli import (add_server, add_waking, cannot_start, reporter, until_stopped,
                                 webhook_receiver)
from signoff.errors import SignoffError
from signoff.resumes import DEFAULT_LEASE_SECONDS

PREFIX = "signoff langgraph resume"


def add_parser(sub: Any) -> None:
    lg = sub.add_parser("langgraph", help="LangGraph helpers").add_subparsers(dest="lg_command", required=True)
    resume = lg.add_parser("resume", help="resume paused LangGraph threads with Signoff's decisions")
    resume.add_argument("--graph", required=True,
                        help="module:function returning the compiled graph (given the checkpointer if it takes one)")
    resume.add_argument("--db", help="a SQLite checkpoint file, or a postgresql:// URL (else the graph's own "
                                     "checkpointer)")
    resume.add_argument("--async", dest="use_async", action="store_true",
                        help="the graph runs with ainvoke (async nodes): use the asyncio checkpointers")
    add_waking(resume, "threads")
    resume.add_argument("--lease", type=int, default=DEFAULT_LEASE_SECONDS,
                        help="seconds a resume stays claimed by a resumer that died (5-3600; renewed while it runs)")
    resume.add_argument("--channel", help="channel for cards this posts (HumanInTheLoopMiddleware interrupts)")
    resume.add_argument("--approver", action="append", help="approver for those cards (repeatable)")
    resume.add_argument("--risk", default=None, help="ask for at least this risk (default: the policy tier)")
    resume.add_argument("--requested-by")
    add_server(resume, "print nothing on start and per resumed thread (warnings still go to stderr)")


def _postgres(db: str | None) -> bool:
    return bool(db) and db.split(":", 1)[0] in ("postgres", "postgresql")  # type: ignore[union-attr]


@contextlib.contextmanager
def _saver(db: str | None) -> Iterator[Any]:
    if not db:
        yield None
    elif _postgres(db):
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(db) as saver:
            saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        yield SqliteSaver(sqlite3.connect(db, check_same_thread=False))


@contextlib.asynccontextmanager
async def _asaver(db: str | None) -> AsyncIterator[Any]:
    if not db:
        yield None
    elif _postgres(db):
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(db) as saver:
            await saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(db) as saver:
            yield saver


def _options(args: argparse.Namespace, report: Callable[[str], None] | None) -> dict[str, Any]:
    return {"scan_every": args.scan_every, "report": report, "lease_seconds": args.lease, "channel": args.channel,
            "approvers": args.approver or None, "risk": args.risk, "requested_by": args.requested_by}


def run(args: argparse.Namespace) -> int:
    from signoff.langgraph_resume import load_factory

    report = reporter(PREFIX, args.quiet)
    try:
        factory = load_factory(args.graph)
        hook = webhook_receiver(args)
    except SignoffError as exc:
        return cannot_start(PREFIX, exc)
    if args.use_async:
        return until_stopped(lambda: asyncio.run(_run_async(args, factory, hook, report)), hook)
    return until_stopped(lambda: _run_blocking(args, factory, hook, report), hook)


def _run_blocking(args: argparse.Namespace, factory: Callable[..., Any], hook: Any,
                  report: Callable[[str], None] | None) -> int:
    from signoff.client import SignoffClient
    from signoff.langgraph_resume import Resumer

    with _saver(args.db) as checkpointer, SignoffClient(args.url, args.token) as client:
        try:
            resumer = Resumer(factory, checkpointer, client=client, webhook=hook, **_options(args, report))
        except SignoffError as exc:
            return cannot_start(PREFIX, exc)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            resumer.run(stop=stop, once=args.once)
        finally:
            resumer.close()
    return 0


async def _run_async(args: argparse.Namespace, factory: Callable[..., Any], hook: Any,
                     report: Callable[[str], None] | None) -> int:
    from signoff.client import AsyncSignoffClient
    from signoff.langgraph_async import AsyncResumer

    async with _asaver(args.db) as checkpointer, AsyncSignoffClient(args.url, args.token) as client:
        try:
            resumer = AsyncResumer(factory, checkpointer, client=client, webhook=hook, **_options(args, report))
        except SignoffError as exc:
            return cannot_start(PREFIX, exc)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        try:
            await resumer.run(stop=stop, once=args.once)
        finally:
            await resumer.aclose()
    return 0
