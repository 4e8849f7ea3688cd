"""Test-side waits for observable state over HTTP (never a fixed sleep that hopes something happened).

`metric` reads one sample from a running Signoff's /metrics (in this process or another);
`until_metric` waits until it reaches a value: a long-poll registered (`signoff_long_polls`),
N more sweeps ran (`signoff_sweeps_total{kind=...}`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families


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
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await metric(url, name, **labels)
        if value >= at_least:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"{name}{labels} stayed at {value}, expected at least {at_least}")
        await asyncio.sleep(0.01)  # test-side only: polling the observable state


async def long_poll_registered(url: str, count: int = 1) -> None:
    await until_metric(url, "signoff_long_polls", count)


async def more_sweeps(url: str, kind: str, more: int) -> None:
    """Until `more` further sweeps of `kind` ("outbox", "timers") finished in that process."""
    now = await metric(url, "signoff_sweeps_total", kind=kind)
    await until_metric(url, "signoff_sweeps_total", now + more, kind=kind)


async def until(check: Callable[[], Awaitable[Any]], what: str, *, timeout: float = 30.0) -> Any:
    """Until `check()` returns something true (returned); AssertionError naming `what` after `timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = await check()
        if found:
            return found
        if loop.time() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.02)  # test-side only: polling the observable state
