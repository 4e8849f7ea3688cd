"""Test-side waits for observable state (never a fixed sleep that hopes something happened).

`until` polls any check until it holds, within a deadline, and fails naming what it waited for
(`until_sync` likewise, for tests that are not on an event loop).
`metric` reads one sample from a running Signoff's /metrics (in this process or another);
`until_metric` waits until it reaches a value: a long-poll registered (`signoff_long_polls`),
N more sweeps ran (`signoff_sweeps_total{kind=...}`).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

if TYPE_CHECKING:
    from tests.support.app import App


T = TypeVar("T")

POLL_SECONDS = 0.01


def _described(check: Callable[..., object], what: str | None) -> str:
    """What a poll waited for: as the test says it, else the check's own source line."""
    if what is not None:
        return what
    try:
        return inspect.getsource(check).strip()
    except (OSError, TypeError):
        return repr(check)


async def until(check: Callable[[], T | Awaitable[T]], what: str | None = None, *, timeout: float = 30.0,
                every: float = POLL_SECONDS) -> T:
    """Poll `check()` (a function or a coroutine function) until it returns something truthy, and return
    that; fail with `what` (what was awaited; by default the check's source) and the last value seen once
    `timeout` seconds have passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {_described(check, what)} "
                                 f"(last: {value!r})")
        await asyncio.sleep(every)  # test-side only: polling the observable state


def until_sync(check: Callable[[], T], what: str | None = None, *, timeout: float = 20.0, every: float = POLL_SECONDS) -> T:
    """`until` for a test with no event loop of its own (the app runs in another thread or process)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {_described(check, what)} "
                                 f"(last: {value!r})")
        time.sleep(every)  # test-side only: polling the observable state


async def metric(url: str, name: str, **labels: str) -> float:
    return (await metrics(url, name, **labels))[0]


async def metrics(url: str, *names: str, **labels: str) -> list[float]:
    """Several samples from ONE scrape of /metrics (so they are consistent with each other)."""
    async with aiohttp.ClientSession() as session, session.get(url + "/metrics") as resp:
        text = await resp.text()
    found = dict.fromkeys(names, 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in found and all(sample.labels.get(k) == v for k, v in labels.items()):
                found[sample.name] = float(sample.value)
    return [found[n] for n in names]


async def until_metric(url: str, name: str, at_least: float, *, timeout: float = 20.0, **labels: str) -> float:
    async def reached() -> tuple[float] | None:
        value = await metric(url, name, **labels)
        return (value,) if value >= at_least else None  # a tuple: a value of 0 is reached too

    [value] = await until(reached, f"{name}{labels} to reach at least {at_least}", timeout=timeout)
    return value


async def waiting_on(app: App, request_id: str) -> None:
    """Until a long-poll on `request_id` is registered in the app's process (its waiter is in memory)."""
    assert app.signoff is not None
    waiters = app.signoff.service.waiters
    await until(lambda: request_id in waiters.waited_ids(), f"a long-poll on {request_id} to be registered")


async def long_poll_registered(url: str, count: int = 1) -> None:
    await until_metric(url, "signoff_long_polls", count)


async def more_sweeps(url: str, kind: str, more: int) -> None:
    """Until `more` further sweeps of `kind` ("outbox", "timers") finished in that process."""
    now = await metric(url, "signoff_sweeps_total", kind=kind)
    await until_metric(url, "signoff_sweeps_total", now + more, kind=kind)
