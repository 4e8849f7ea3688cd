"""Driving `signoff serve` subprocesses on one database with a clock the test moves (SIGNOFF_CLOCK_FILE)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import sqlalchemy as sa

from storage.schema import outbox, requests
from storage.sql import SqlStore
from tests.fakes.clock import ClockFile
from bot.sandbox import SlackEmulator
from bot.sandbox.signed import SlackClient
from tests.support.app import SIGNING_SECRET, App
from tests.support.process import ServerProcess


def server_env(clock: ClockFile) -> dict[str, str]:
    # The ticker and the outbox look often (real time); what is due is decided by the file's clock.
    return {"SIGNOFF_CLOCK_FILE": str(clock.path), "SIGNOFF_SWEEP_SECONDS": "0.05",
            "SIGNOFF_OUTBOX_SWEEP_SECONDS": "0.05", "SIGNOFF_LOG_LEVEL": "WARNING"}


def client(server: ServerProcess, slack: SlackEmulator) -> App:
    """The harness's HTTP client pointed at a subprocess (no in-process `signoff`)."""
    return App(server.url, slack, aiohttp.ClientSession(), SlackClient(server.url, SIGNING_SECRET, fake=slack))


# While a test waits, its clock creeps forward by this much per POLL of real time: a delivery that
# failed for a moment (e.g. "too many clients" on a shared PostgreSQL) is retried after its backoff,
# as it would be in real time. 0.1 s per 0.05 s stays far below every timer step (minutes) and below
# the outbox lease (60 s) of anything still in flight, so creeping never fires a step or a duplicate.
CREEP = timedelta(seconds=0.1)
POLL = 0.05


async def quiet(store: SqlStore, clock: ClockFile, *, timeout: float = 30.0) -> None:
    """Wait until nothing is due: no request due at the clock's time, no outbox item pending."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        busy, due = await counts(store, clock.now())
        if not busy and not due:
            return
        if loop.time() > deadline:
            raise AssertionError(f"still busy: {busy} outbox items pending, {due} requests due")
        await asyncio.sleep(POLL)  # test-side only
        clock.set(clock.now() + CREEP)


async def calls(slack: SlackEmulator, clock: ClockFile, method: str, count: int, *, timeout: float = 60.0,
                ok_only: bool = True) -> list[Any]:
    """SlackEmulator.wait_for, letting the test clock creep meanwhile (see CREEP)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            return await slack.wait_for(method, count, timeout=POLL, ok_only=ok_only)
        except AssertionError:
            if loop.time() > deadline:
                raise
            clock.set(clock.now() + CREEP)


async def counts(store: SqlStore, now: Any) -> tuple[int, int]:
    """(outbox items pending, requests due at `now`), read without claiming anything."""
    pending = sa.select(sa.func.count()).select_from(outbox).where(outbox.c.status == "pending")
    due = sa.select(sa.func.count()).select_from(requests).where(
        requests.c.status == "pending", requests.c.next_due_at <= now)
    async with store.engine.connect() as conn:
        return int((await conn.execute(pending)).scalar() or 0), int((await conn.execute(due)).scalar() or 0)


def log_tail(*servers: ServerProcess) -> str:
    return "\n".join(Path(s.log_path).read_text()[-3000:] for s in servers if s.log_path)


def thread_posts(slack: SlackEmulator, card_ts: str) -> list[Any]:
    return [c for c in slack.calls_to("chat.postMessage", ok_only=False) if c.args.get("thread_ts") == card_ts]
