"""Load generation: signed Slack clicks, agent API calls, and the timed phases built from them.

Durations inside this process use `time.perf_counter()`; comparisons with the fake Slack's
records use `time.monotonic()` (CLOCK_MONOTONIC, one clock for every process on a Linux host).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json as json_module
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import sqlalchemy as sa
from slack_sdk.signature import SignatureVerifier

from bench.fake_slack import Post, SlackHandle
from storage.sql import SqlStore
from storage.stores import open_store
from bot.sandbox.signed import Response, SlackClient
from bench.harness import API_TOKEN, SIGNING_SECRET, approval_body

T = TypeVar("T")
CLICKER = "U1"  # one of the requests' approvers: every click is allowed and wins


# ---------------------------------------------------------------------- figures


@dataclass
class Dist:
    """A latency distribution in seconds; shown in milliseconds."""

    values: list[float] = field(default_factory=list)

    def add(self, seconds: float) -> None:
        self.values.append(seconds)

    @property
    def n(self) -> int:
        return len(self.values)

    def pct(self, p: float) -> float:
        """Nearest-rank percentile, in ms."""
        if not self.values:
            return math.nan
        ordered = sorted(self.values)
        return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)] * 1000

    @property
    def p50(self) -> float:
        return self.pct(50)

    @property
    def p99(self) -> float:
        return self.pct(99)

    @property
    def max(self) -> float:
        return max(self.values) * 1000 if self.values else math.nan

    def __str__(self) -> str:
        return f"n={self.n} p50={self.p50:.1f} ms p99={self.p99:.1f} ms max={self.max:.1f} ms"


# ---------------------------------------------------------------------- clicks


@dataclass(frozen=True)
class Signed:
    body: bytes
    headers: dict[str, str]


class _Capture(SlackClient):
    """The tests' Slack payload builders, minus the sending: keeps the body to sign and send later."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:9", SIGNING_SECRET)
        self.body = b""

    async def post_raw(self, body: str | bytes, *, content_type: str, **_: Any) -> Response:
        self.body = body.encode() if isinstance(body, str) else body
        return Response(status=200)


_capture = _Capture()
_verifier = SignatureVerifier(SIGNING_SECRET)


async def click_body(request_id: str, post: Post) -> bytes:
    """An Approve click on the card exactly as Slack sends it (the card's message included)."""
    await _capture.block_action(user=CLICKER, user_name="alice", action_id="signoff_approve", value=request_id,
                                block_id="decide", channel=post.channel, message_ts=post.ts, message=post.message)
    return _capture.body


def sign(body: bytes) -> Signed:
    """Sign now; Slack's verifier accepts the timestamp for 5 minutes, far longer than a phase."""
    ts = str(int(time.time()))
    signature = _verifier.generate_signature(timestamp=ts, body=body)
    assert signature is not None
    return Signed(body, {"Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": ts,
                         "X-Slack-Signature": signature})


# ---------------------------------------------------------------------- HTTP


class Client:
    """One keep-alive connection pool for the whole bench (no connection limit, as Slack's fleet has none)."""

    def __init__(self) -> None:
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                             timeout=aiohttp.ClientTimeout(total=90))
        self.auth = {"Authorization": f"Bearer {API_TOKEN}"}

    async def api(self, method: str, url: str, *, json: Any = None) -> tuple[int, Any]:
        async with self.session.request(method, url, json=json, headers=self.auth) as resp:
            text = await resp.text()
            try:
                return resp.status, json_module.loads(text)
            except ValueError:
                raise RuntimeError(f"{method} {url}: HTTP {resp.status}, not JSON: {text[:200]!r}") from None

    async def send(self, url: str, signed: Signed) -> tuple[int, float]:
        """POST a signed Slack request; (status, seconds until the whole answer was read)."""
        started = time.perf_counter()
        async with self.session.post(url, data=signed.body, headers=signed.headers) as resp:
            await resp.read()
            return resp.status, time.perf_counter() - started

    async def text(self, url: str) -> str:
        async with self.session.get(url) as resp:
            return await resp.text()

    async def close(self) -> None:
        await self.session.close()


async def decisions(client: Client, server_url: str) -> int:
    """Decisions this server process recorded (from its /metrics)."""
    text = await client.text(server_url + "/metrics")
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("signoff_decisions_total{")))


class LoopLag:
    """How late this process's event loop wakes a sleeper: if the load generator lags, every figure it
    times is inflated, so this is printed beside them."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.lag = Dist()
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(self.interval)
            self.lag.add(time.perf_counter() - started - self.interval)

    async def __aenter__(self) -> Dist:
        self._task = asyncio.create_task(self._run())
        return self.lag

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def shares(items: Sequence[T], workers: int) -> list[list[T]]:
    return [list(items[i::workers]) for i in range(workers)]


async def run_workers(workers: list[Callable[[], Awaitable[None]]]) -> float:
    """Start all workers together; the wall time until the last one finished (one failing stops them all)."""
    started = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for worker in workers:
            group.create_task(worker())  # type: ignore[arg-type]
    return time.perf_counter() - started


# ---------------------------------------------------------------------- phases


async def submit_many(
    client: Client, server_url: str, count: int, concurrency: int
) -> tuple[list[str], dict[str, float]]:
    """Create `count` approval requests from `concurrency` agents; (ids in order, monotonic send time per id)."""
    ids: list[str] = []
    sent: dict[str, float] = {}
    counter = itertools.count()

    async def agent() -> None:
        while next(counter) < count:
            started = time.monotonic()
            status, body = await client.api("POST", server_url + "/api/v1/approvals", json=approval_body())
            if status != 201:
                raise RuntimeError(f"submit failed: {status} {body}")
            ids.append(body["id"])
            sent[body["id"]] = started

    await run_workers([agent] * concurrency)
    return ids, sent


async def wait_cards_stored(client: Client, server_url: str, ids: Sequence[str], timeout: float = 180.0) -> None:
    """Until the server has stored every card's ts (so a click can never race the post)."""
    missing = set(ids)
    deadline = time.monotonic() + timeout
    while missing:
        cursor = None
        while True:
            url = server_url + "/api/v1/approvals?status=pending&limit=200" + (f"&cursor={cursor}" if cursor else "")
            _, page = await client.api("GET", url)
            missing -= {item["id"] for item in page["items"] if item["card"]}
            cursor = page["next_cursor"]
            if not cursor:
                break
        if missing:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(missing)} cards were not posted within {timeout:g} s")
            await asyncio.sleep(0.1)


async def wait_updates(slack: SlackHandle, expected: int, timeout: float = 180.0, quiet: float = 0.3) -> float:
    """Until the fake has received `expected` chat.update calls (one per decided card); seconds that took.

    Then also until no Web API call at all has arrived for `quiet` seconds, so whatever else the
    decisions set off (App Home republishes, ...) is not still running when the next phase starts.
    """
    started = time.monotonic()
    while (await slack.counts()).get("chat.update", 0) < expected:
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"fewer than {expected} card updates after {timeout:g} s")
        await asyncio.sleep(0.02)
    took = time.monotonic() - started
    total, since = (await slack.counts())["total"], time.monotonic()
    while time.monotonic() - since < quiet and time.monotonic() - started < timeout:
        await asyncio.sleep(0.05)
        now_total = (await slack.counts())["total"]
        if now_total != total:
            total, since = now_total, time.monotonic()
    return took


@dataclass
class AckResult:
    latency: Dist
    errors: int
    wall: float


async def ack_phase(client: Client, url: str, bodies: Sequence[Signed], clickers: int) -> AckResult:
    """`clickers` concurrent clickers, each looping over its share of the signed clicks."""
    latency = Dist()
    errors = 0

    def clicker(share: list[Signed]) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            nonlocal errors
            for signed in share:
                status, seconds = await client.send(url, signed)
                latency.add(seconds)
                errors += status != 200
        return run

    wall = await run_workers([clicker(s) for s in shares(bodies, clickers)])
    return AckResult(latency, errors, wall)


@dataclass
class WakeResult:
    wake: Dist  # click sent -> long-poll answered
    ack: Dist  # the same clicks' ack round trips
    early: int  # long-polls that returned before their click (should be 0)
    not_approved: int


async def wake_phase(client: Client, poll_url: str, click_url: str, items: Sequence[tuple[str, Signed]],
                     concurrency: int, settle: float = 0.1, jitter: float = 0.02) -> WakeResult:
    """Per request: a long-poll waits on `poll_url`, then the click goes to `click_url`.

    `settle` seconds between starting the long-poll and clicking lets the server register the
    waiter; workers start staggered over `settle` so the clicks do not arrive in waves. Each wait
    also gets 0-`jitter` s at random (seeded), so clicks do not land in a fixed phase of the SQLite
    cross-process check (every 20 ms from the moment the first waiter registers): without it the
    figure moved by a whole check period when the decision took a few ms more or less.
    """
    rng = random.Random(7)
    result = WakeResult(Dist(), Dist(), 0, 0)

    def worker(index: int, share: list[tuple[str, Signed]]) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            await asyncio.sleep(index * settle / concurrency)
            for request_id, signed in share:
                async def poll() -> tuple[float, Any]:
                    _, body = await client.api("GET", f"{poll_url}/api/v1/approvals/{request_id}?wait=30")
                    return time.perf_counter(), body

                waiting = asyncio.create_task(poll())
                await asyncio.sleep(settle + rng.uniform(0, jitter))
                result.early += waiting.done()
                clicked = time.perf_counter()
                _, ack_seconds = await client.send(click_url + "/slack/events", signed)
                returned, body = await waiting
                result.wake.add(returned - clicked)
                result.ack.add(ack_seconds)
                result.not_approved += body.get("status") != "approved"
        return run

    await run_workers([worker(i, s) for i, s in enumerate(shares(items, concurrency))])
    return result


@dataclass
class E2EResult:
    approvals: int  # finished inside the timed window
    window: float
    latency: Dist  # submit sent -> long-poll answered "approved"
    card: Dist  # submit sent -> the fake recorded chat.postMessage
    wake: Dist  # click sent -> long-poll answered
    ack: Dist  # the clicks' ack round trips
    card_gets: int = 0  # GETs while waiting for the stored card ts (1 per approval at best)
    completed: int = 0  # every approval, warm-up and after the window included

    @property
    def rate(self) -> float:
        return self.approvals / self.window


async def e2e_phase(client: Client, server_url: str, slack: SlackHandle, agents: int, seconds: float, *,
                    look: bool = False) -> E2EResult:
    """`agents` closed-loop agents for `seconds` (after one warm-up round): submit -> long-poll waits ->
    the card appears in Slack -> the human reads it (0.1 s) and clicks Approve -> the long-poll returns
    approved. The click goes as a person's does: once Slack shows the card, whether or not Signoff has
    stored the card's ts by then (a click that comes first is checked without it, and its decision's
    card update waits for the post's result: both tested). `look=True`: the agent GETs the request
    every 0.1 s until Signoff has stored the ts, and clicks only then (the figures before December 1st:
    about one GET per approval that no real flow makes)."""
    result = E2EResult(0, seconds, Dist(), Dist(), Dist(), Dist())

    async def one(deadline: float | None) -> None:
        started, started_mono = time.perf_counter(), time.monotonic()
        status, body = await client.api("POST", server_url + "/api/v1/approvals", json=approval_body())
        if status != 201:
            raise RuntimeError(f"submit failed: {status} {body}")
        request_id = body["id"]
        waiting = asyncio.create_task(client.api("GET", f"{server_url}/api/v1/approvals/{request_id}?wait=30"))
        post = await slack.wait_post(request_id)
        gets = 0
        while True:  # Slack shows the card: a person takes longer than 0.1 s to read it anyway
            await asyncio.sleep(0.1)
            if not look:
                break
            gets += 1
            _, current = await client.api("GET", f"{server_url}/api/v1/approvals/{request_id}")
            if current["card"]:
                break
        signed = sign(await click_body(request_id, post))
        clicked = time.perf_counter()
        status, ack_seconds = await client.send(server_url + "/slack/events", signed)
        _, final = await waiting
        done = time.perf_counter()
        if status != 200 or final["status"] != "approved":
            raise RuntimeError(f"e2e approval failed: click {status}, request {final.get('status')}")
        result.completed += 1
        if deadline is not None and done <= deadline:
            result.approvals += 1
            result.latency.add(done - started)
            result.card.add(post.at - started_mono)
            result.wake.add(done - clicked)
            result.ack.add(ack_seconds)
            result.card_gets += gets

    async def warm() -> None:
        await one(None)

    async def timed() -> None:
        while time.perf_counter() < deadline:
            await one(deadline)

    await run_workers([warm] * agents)
    deadline = time.perf_counter() + seconds
    await run_workers([timed] * agents)
    return result


async def tx_rate(db_url: str, concurrency: int, seconds: float = 3.0, warmup: float = 0.5) -> tuple[float, int]:
    """Committed small INSERT transactions per second through `open_store` (same engines, pool and
    SQLite write lock as the server) from `concurrency` tasks; (tx/s, commits counted)."""
    store = await open_store(db_url)
    table = sa.Table(
        "bench_tx", sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("request_id", sa.String(64), nullable=False),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    )
    async with store.unit() as unit:
        await unit.conn.run_sync(lambda c: table.create(c, checkfirst=True))
    stop = asyncio.Event()
    counting = False
    committed = 0

    async def writer(index: int) -> None:
        nonlocal committed
        for n in itertools.count():
            if stop.is_set():
                return
            async with store.unit() as unit:
                await unit.conn.execute(table.insert().values(
                    request_id=f"apr_{index:04d}_{n:010d}", data={"type": "decided", "via": "button"},
                    at=sa.func.current_timestamp()))
            committed += counting

    tasks = [asyncio.create_task(writer(i)) for i in range(concurrency)]
    try:
        await asyncio.sleep(warmup)
        counting, started = True, time.perf_counter()
        await asyncio.sleep(seconds)
        counted, wall = committed, time.perf_counter() - started
        stop.set()
        await asyncio.gather(*tasks)
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        async with store.unit() as unit:
            await unit.conn.run_sync(lambda c: table.drop(c, checkfirst=True))
        await store.close()
    return counted / wall, counted
