"""Timers over the real boundaries: the app in this process with a FakeClock the test moves (`tapp`;
`uapp` under the undo window's policy)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from tests.fakes.clock import FakeClock
from bot.sandbox import SlackEmulator
from tests.approvals.undo_steps import POLICY as UNDO_POLICY
from tests.support.app import App, policy_app, start_app


@pytest_asyncio.fixture
async def clock() -> FakeClock:
    return FakeClock()


@pytest_asyncio.fixture
async def tapp(db_url: str, slack: SlackEmulator, clock: FakeClock) -> AsyncIterator[App]:
    """The app on a clock that stands still; tests move it and run the sweep (the job's one function).

    The APScheduler job itself runs once at start and then only hourly (real time), so the
    Slack calls a test sees come from the sweeps it runs; the subprocess tests use the real ticker.
    """
    slack.add_user("UMGR2", "director")
    running = await start_app(db_url, slack, clock=clock, SIGNOFF_SWEEP_SECONDS="3600")
    try:
        yield running
    finally:
        await running.stop()


@pytest_asyncio.fixture
async def uapp(db_url: str, slack: SlackEmulator, clock: FakeClock, tmp_path: Path) -> AsyncIterator[tuple[App, FakeClock]]:
    """The app under the undo window's policy (docs/policy.md: `undo: 30s`), on a clock that stands still
    (as `tapp`'s): the test moves it and runs the sweep (timer_steps.tick)."""
    async with policy_app(db_url, slack, tmp_path, UNDO_POLICY, clock=clock, SIGNOFF_SWEEP_SECONDS="3600") as running:
        yield running, clock
