"""The fake Slack Web API for benchmarks: bot.sandbox.SlackEmulator plus an index of posted cards.

Two placements with one interface (`SlackHandle`):

- `InProcessSlack`: SlackEmulator on the bench process's own event loop.
- `SubprocessSlack`: `python -m bench.fake_slack` in its own process; a small control server next to
  the fake answers "when was the card for request X posted, and what did it look like".

Both record, per request id (from the card's `metadata.event_payload.request_id`), the moment
chat.postMessage created the card as `time.monotonic()`. On Linux that is CLOCK_MONOTONIC, one clock
for every process on the host, so it can be compared with the bench process's own readings.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import aiohttp
from aiohttp import web

from bot.sandbox import SlackEmulator

USERS = [("U1", "alice"), ("U2", "bob"), ("U3", "carol")]
CHANNELS = 200  # C1 ... C200: benches that spread cards over many channels (Slack paces each one)


@dataclass(frozen=True)
class Post:
    """One card as chat.postMessage created it."""

    at: float  # time.monotonic() in the fake's process
    channel: str
    ts: str
    message: dict[str, Any]  # as Slack echoes it in a block_actions payload (blocks, metadata, ...)


class BenchSlack(SlackEmulator):
    """SlackEmulator that also indexes cards by request id and can be awaited per request."""

    def __init__(self) -> None:
        super().__init__()
        # Every message's blocks parsed with slack_sdk's models was over a third of this process's CPU,
        # taken from the 2 CPUs the server under measurement shares: parse the first 20 and one in 20
        # after (the test suite's fake parses every one).
        self.block_check_every = 20
        self.posts: dict[str, Post] = {}
        self._counts: Counter[str] = Counter()
        self._counted = 0
        self._post_waiters: dict[str, asyncio.Event] = {}
        self._update_waiters: dict[str, asyncio.Event] = {}  # message ts -> its next chat.update
        for n in range(1, CHANNELS + 1):
            self.add_channel(f"C{n}", "approvals" if n == 1 else f"approvals-{n}")
        for uid, name in USERS:
            self.add_user(uid, name)

    def _chat_post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        out = super()._chat_post_message(args)
        message = out["message"]
        request_id = ((message.get("metadata") or {}).get("event_payload") or {}).get("request_id")
        if isinstance(request_id, str):
            self.posts[request_id] = Post(time.monotonic(), out["channel"], out["ts"], message)
            waiter = self._post_waiters.pop(request_id, None)
            if waiter is not None:
                waiter.set()
        return out

    def _chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        out = super()._chat_update(args)
        waiter = self._update_waiters.pop(str(args.get("ts")), None)
        if waiter is not None:
            waiter.set()
        return out

    def next_update(self, ts: str) -> asyncio.Event:
        """Set by the next chat.update of the message `ts` (take it before what causes the update)."""
        return self._update_waiters.setdefault(ts, asyncio.Event())

    async def wait_post(self, request_id: str, timeout: float = 30.0) -> Post:
        if request_id not in self.posts:
            waiter = self._post_waiters.setdefault(request_id, asyncio.Event())
            await asyncio.wait_for(waiter.wait(), timeout)
        return self.posts[request_id]

    def counts(self, full: bool = False) -> dict[str, int]:
        """Calls per method and "total"; `full` adds "not_ok", the calls answered with an error (a scan
        of every call: a call's outcome is set after it is recorded)."""
        # Polled every 20 ms while tens of thousands of calls pile up: count only the calls since the last look.
        new = self.calls[self._counted:]
        self._counted += len(new)
        self._counts.update(c.method for c in new)
        out = {**self._counts, "total": self._counted}
        if full:
            out["not_ok"] = sum(1 for c in self.calls if not c.ok)
        return out


class SlackHandle(Protocol):
    url: str

    async def wait_post(self, request_id: str, timeout: float = 30.0) -> Post: ...

    async def posts(self) -> dict[str, Post]: ...

    async def counts(self, full: bool = False) -> dict[str, int]: ...

    async def stop(self) -> None: ...


class InProcessSlack:
    """The fake on this process's event loop (shares the CPU and the loop with the load generator)."""

    def __init__(self) -> None:
        self.fake = BenchSlack()
        self.url = ""

    async def start(self) -> None:
        await self.fake.start()
        self.url = self.fake.url

    async def wait_post(self, request_id: str, timeout: float = 30.0) -> Post:
        return await self.fake.wait_post(request_id, timeout)

    async def posts(self) -> dict[str, Post]:
        return dict(self.fake.posts)

    async def counts(self, full: bool = False) -> dict[str, int]:
        return self.fake.counts(full)

    async def stop(self) -> None:
        await self.fake.stop()

    async def __aenter__(self) -> InProcessSlack:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()


class SubprocessSlack:
    """The fake in its own process; this side talks to its control server over loopback HTTP."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.url = ""
        self.control = ""
        self.proc: asyncio.subprocess.Process | None = None
        self.session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        root = Path(__file__).resolve().parent.parent
        env = {**os.environ, "PYTHONPATH": str(root)}
        with open(self.log_path, "ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bench.fake_slack", stdout=asyncio.subprocess.PIPE, stderr=log, env=env,
                cwd=str(self.log_path.parent),
            )
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 30)
        if not line:
            raise RuntimeError(f"fake Slack did not start:\n{self.log_path.read_text()}")
        info = json.loads(line)
        self.url, self.control = info["api"], info["control"]
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                             timeout=aiohttp.ClientTimeout(total=120))

    async def _get(self, path: str) -> Any:
        assert self.session is not None
        async with self.session.get(self.control + path) as resp:
            resp.raise_for_status()
            return await resp.json()

    async def wait_post(self, request_id: str, timeout: float = 30.0) -> Post:
        return Post(**await self._get(f"/posts/{request_id}?wait={timeout}"))

    async def posts(self) -> dict[str, Post]:
        return {k: Post(**v) for k, v in (await self._get("/posts")).items()}

    async def counts(self, full: bool = False) -> dict[str, int]:
        return dict(await self._get("/counts?full=1" if full else "/counts"))

    async def stop(self) -> None:
        if self.session is not None:
            await self.session.close()
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


async def _serve() -> None:
    fake = BenchSlack()
    await fake.start()

    async def post(request: web.Request) -> web.Response:
        try:
            found = await fake.wait_post(request.match_info["id"], float(request.query.get("wait", "30")))
        except TimeoutError:
            return web.json_response({"error": "no such card yet"}, status=404)
        return web.json_response(asdict(found))

    async def posts(_request: web.Request) -> web.Response:
        return web.json_response({k: asdict(v) for k, v in fake.posts.items()})

    async def counts(_request: web.Request) -> web.Response:
        return web.json_response(fake.counts(full=_request.query.get("full") == "1"))

    control = web.Application()
    control.router.add_get("/posts/{id}", post)
    control.router.add_get("/posts", posts)
    control.router.add_get("/counts", counts)
    runner = web.AppRunner(control, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    print(json.dumps({"api": fake.url, "control": f"http://127.0.0.1:{port}"}), flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    with contextlib.suppress(Exception):
        await runner.cleanup()
    await fake.stop()


if __name__ == "__main__":
    asyncio.run(_serve())
