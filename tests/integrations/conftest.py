"""Fixtures for the agent-side integrations: a flaky network in front of the running app."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from tests.fakes.flaky_proxy import FlakyProxy
from tests.harness import App


@pytest_asyncio.fixture
async def proxy(app: App) -> AsyncIterator[FlakyProxy]:
    running = await FlakyProxy(app.url).start()
    try:
        yield running
    finally:
        await running.stop()
