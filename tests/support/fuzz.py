"""Run Hypothesis against the app over HTTP.

Hypothesis drives a plain (sync) test function; the app and its clients live on the test's event
loop. So the examples run in a worker thread and hand each request to the loop
(`run_coroutine_threadsafe`). Every example must leave: no 5xx answer, no error logged by the app
(an unhandled task exception, a crashed listener), and for a refused API call, no row written.

    SIGNOFF_FUZZ_EXAMPLES   examples per test (default 120; e.g. 5000 for a long run)
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine
from typing import Any

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("SIGNOFF_FUZZ_EXAMPLES", "120"))
FUZZ_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                         suppress_health_check=list(HealthCheck))


class ErrorLog(logging.Handler):
    """Collects ERROR records from the app, aiohttp and asyncio (a crashed task logs there)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def __enter__(self) -> ErrorLog:
        logging.getLogger().addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger().removeHandler(self)

    def take(self) -> list[str]:
        shown = [f"{r.name}: {r.getMessage()}" + (f"\n{r.exc_text or ''}" if r.exc_info else "") for r in self.records]
        self.records.clear()
        return shown


async def in_thread(loop: asyncio.AbstractEventLoop, run: Callable[[Callable[[Coroutine[Any, Any, Any]], Any]], None]
                    ) -> None:
    """Call `run(call)` in a worker thread; `call(coro)` runs `coro` on `loop` and returns its result."""
    def call(coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=60)

    await asyncio.to_thread(run, call)
