"""How a long-poll in one process hears about a decision made in another, and what that costs
(issue 9, defect 8: the SQLite watcher's cost must not grow with the number of waiters).

Two servers share one database. Long-polls wait on A; B decides. On SQLite, A's one watcher looks
at PRAGMA data_version and, when another connection committed, reads the audit rows since its last
look once, then wakes the waiters of those ids from memory. Its cost is counted in A's /metrics
(looks, looks that found a change, statements); the same window is measured with 1 and with 200
long-polls held, and each look costs the same. On PostgreSQL LISTEN/NOTIFY pushes: no looks at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from bot.sandbox import SlackEmulator
from tests.support.app import App, start_app
from tests.support.waits import long_poll_registered, metrics, until_metric

POLLS_PER_REQUEST = 5


@dataclass(frozen=True)
class Cost:
    looks: float
    changes: float
    queries: float

    def __sub__(self, other: Cost) -> Cost:
        return Cost(self.looks - other.looks, self.changes - other.changes, self.queries - other.queries)


async def watch_cost(app: App) -> Cost:
    names = ("looks", "changes", "queries")
    return Cost(*await metrics(app.url, *(f"signoff_longpoll_watch_{n}_total" for n in names)))


@pytest_asyncio.fixture
async def two(db_url: str, slack: SlackEmulator) -> AsyncIterator[tuple[App, App]]:
    a = await start_app(db_url, slack, SIGNOFF_LONGPOLL_PER_TOKEN="500", SIGNOFF_LONGPOLL_MAX="500")
    b = await start_app(db_url, slack)
    try:
        yield a, b
    finally:
        await b.stop()
        await a.stop()


async def hold_and_decide_elsewhere(a: App, b: App, polls: int) -> Cost:
    """Hold `polls` long-polls on A; let B decide unrelated requests while they wait (the window
    measured); then B decides the waited ones and every poll must return its decision."""
    targets = [(await a.submit(summary=f"Waited {n}"))["id"] for n in range(max(1, polls // POLLS_PER_REQUEST))]
    others = [(await b.submit(summary=f"Other {n}"))["id"] for n in range(3)]
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))  # 200 connections at once

    async def wait_on(request_id: str) -> tuple[int, Any]:
        async with session.get(f"{a.url}/api/v1/approvals/{request_id}?wait=60", headers=a.headers) as resp:
            return resp.status, await resp.json()

    waits = [asyncio.create_task(wait_on(targets[n % len(targets)])) for n in range(polls)]
    try:
        await long_poll_registered(a.url, polls)
        before = await watch_cost(a)
        for request_id in others:
            status, _ = await b.api("POST", f"/api/v1/approvals/{request_id}/cancel", json={})
            assert status == 200
        sqlite = a.signoff is not None and a.signoff.store.dialect == "sqlite"
        if sqlite:  # the window: A's watcher saw B's commits, over at least 25 looks
            await until_metric(a.url, "signoff_longpoll_watch_changes_total", before.changes + 1)
            await until_metric(a.url, "signoff_longpoll_watch_looks_total", before.looks + 25)
        cost = await watch_cost(a) - before
        assert all(not w.done() for w in waits)  # nothing they wait for was decided: they still wait
        for request_id in targets:
            status, _ = await b.api("POST", f"/api/v1/approvals/{request_id}/cancel", json={})
            assert status == 200
        answers: list[tuple[int, Any]] = await asyncio.wait_for(asyncio.gather(*waits), 60)
        assert [(s, body["status"]) for s, body in answers] == [(200, "cancelled")] * polls
    finally:
        for w in waits:
            w.cancel()
        await session.close()
    await long_poll_registered(a.url, 0)
    return cost


@pytest.mark.postgres_only
async def test_on_postgresql_nothing_is_polled_however_many_wait(two: tuple[App, App]) -> None:
    """LISTEN/NOTIFY pushes the decisions made elsewhere: no watcher looks, with 1 or 200 long-polls."""
    a, b = two
    assert await hold_and_decide_elsewhere(a, b, 1) == await hold_and_decide_elsewhere(a, b, 200) == Cost(0, 0, 0)


@pytest.mark.sqlite_only
async def test_the_watchers_cost_does_not_grow_with_the_waiters(two: tuple[App, App]) -> None:
    a, b = two
    one = await hold_and_decide_elsewhere(a, b, 1)
    many = await hold_and_decide_elsewhere(a, b, 200)
    print(f"\nwatcher cost, 1 long-poll: {one}; 200 long-polls: {many}")
    for cost in (one, many):
        assert cost.looks >= 25 and cost.changes >= 1
        # One statement a look (data_version), one more when it changed (the audit rows since the last
        # look): the same with 200 waiters as with one. A watcher that asked per waiter would make
        # hundreds of statements a changed look here.
        assert cost.queries <= cost.looks + cost.changes, cost


@pytest.mark.sqlite_only
async def test_the_watcher_looks_only_at_other_processes_commits(app: App) -> None:
    """A's own commits woke A's waiters already (in memory): A's watcher finds no change in them,
    so it never reads the audit rows for them, and a waiter is not woken to read its request again."""
    assert app.signoff is not None
    waited = (await app.submit(summary="Waited"))["id"]
    session = aiohttp.ClientSession()
    try:
        async def wait_on() -> Any:
            async with session.get(f"{app.url}/api/v1/approvals/{waited}?wait=60", headers=app.headers) as resp:
                return await resp.json()

        waiting = asyncio.create_task(wait_on())
        await long_poll_registered(app.url, 1)
        before = await watch_cost(app)
        for n in range(5):  # this process commits: new requests, their cards, a decision
            other = (await app.submit(summary=f"Other {n}"))["id"]
            status, _ = await app.api("POST", f"/api/v1/approvals/{other}/cancel", json={})
            assert status == 200
        await until_metric(app.url, "signoff_longpoll_watch_looks_total", before.looks + 10)
        cost = await watch_cost(app) - before
        assert cost.changes == 0 and cost.queries == cost.looks, cost  # a data_version a look, nothing more
        status, _ = await app.api("POST", f"/api/v1/approvals/{waited}/cancel", json={})
        assert status == 200
        assert (await asyncio.wait_for(waiting, 30))["status"] == "cancelled"
    finally:
        waiting.cancel()
        await session.close()
