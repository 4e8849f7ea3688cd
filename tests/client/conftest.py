"""Fixtures for the agent-side integrations: a flaky network in front of the app, a fake model for Claude."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

import signoff.signatures as sig

from tests.fakes.claude_api import FakeClaudeApi
from tests.fakes.flaky_proxy import FlakyProxy
from tests.support.app import App


@pytest.fixture(autouse=True)
def _fresh_keyring() -> Iterator[None]:
    """Each test starts with a process that trusts no key yet: a key pinned by an earlier test's client
    (trust on first use, per process) would make a later test's fake, unsigned decision fail its check."""
    sig.reset({})
    yield
    sig.reset({})


@pytest_asyncio.fixture
async def proxy(app: App) -> AsyncIterator[FlakyProxy]:
    running = await FlakyProxy(app.url).start()
    try:
        yield running
    finally:
        await running.stop()


@pytest_asyncio.fixture
async def model() -> AsyncIterator[FakeClaudeApi]:
    """The streaming fake of the Messages API that the real Claude Code CLI talks to."""
    fake = await FakeClaudeApi().start()
    try:
        yield fake
    finally:
        await fake.stop()
