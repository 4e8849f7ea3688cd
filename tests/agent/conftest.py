"""Fixtures for agent-run scenarios: the app over HTTP with a scripted Anthropic fake behind the real SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from tests.agent.helpers import AgentApp
from bot.sandbox.model import FakeAnthropic
from bot.sandbox import SlackEmulator
from tests.support.app import start_app


@pytest_asyncio.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    fake = FakeAnthropic()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


def agent_env(model: FakeAnthropic, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "ANTHROPIC_BASE_URL": model.url,
        "ANTHROPIC_API_KEY": "test-key",
        "SIGNOFF_MODEL": "claude-test",
        "SIGNOFF_WORKSPACE": str(tmp_path / "workspace"),
        "SIGNOFF_EMAIL_OUTBOX": str(tmp_path / "outbox"),
        **extra,
    }


@pytest_asyncio.fixture
async def agent(db_url: str, slack: SlackEmulator, model: FakeAnthropic, tmp_path: Path) -> AsyncIterator[AgentApp]:
    running = await start_app(db_url, slack, **agent_env(model, tmp_path))
    try:
        yield AgentApp(running, model, tmp_path)
    finally:
        await running.stop()
