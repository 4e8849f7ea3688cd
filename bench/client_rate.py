"""How many requests a waiting Python client sends per minute (issue 34: no client loop without a bound).

    python -m bench.client_rate [--seconds 15]

A `signoff serve` subprocess on a scratch SQLite database, the sandbox's Slack emulator in this
process (it knows channel C1; C0123ABCD is `channel_not_found`), and `SignoffClient.decision()` in
threads, each client's every attempt counted as it is sent (httpx event hook: refused connections
count too). Each case runs for `--seconds`:

  pending        a request nobody decides: long-polls of 50 s, back to back
  undeliverable  a request whose card Slack refused: the wait ends with UndeliverableError
  restart        a pending request while the server is killed (SIGKILL), down for a third of the window,
                 and started again on the same port and database: the client retries with backoff,
                 then long-polls again

Requests per minute = requests in the window / the window's minutes (the first long-poll of a
window counts as one request, so short windows overstate the pending rate). No figure is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx2

from bench.harness import API_TOKEN, approval_body
from bench.procs import scratch_database, signoff_server
from bot.sandbox import SlackEmulator
from signoff import SignoffClient, SignoffError

NOWHERE = "C0123ABCD"


@dataclass
class Counted:
    """One waiting client: the requests it sent and how its wait ended."""

    sent: list[float] = field(default_factory=list)
    ended: str = "still waiting"

    def client(self, url: str) -> SignoffClient:
        http = httpx2.Client(headers={"Authorization": f"Bearer {API_TOKEN}"}, trust_env=False,
                             event_hooks={"request": [lambda request: self.sent.append(time.monotonic())]})
        return SignoffClient(url, API_TOKEN, http=http, retry_for=120)

    def wait(self, url: str, request_id: str, seconds: float) -> threading.Thread:
        def run() -> None:
            try:
                found = self.client(url).decision(request_id, seconds)
                self.ended = "still pending at the end" if found is None else f"decided: {found.outcome}"
            except SignoffError as exc:
                self.ended = f"{type(exc).__name__} ({getattr(exc, 'reason', None) or exc.code})"
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def between(self, start: float, end: float) -> int:
        return sum(1 for t in self.sent if start <= t < end)


def per_minute(count: int, seconds: float) -> str:
    return f"{count * 60 / seconds:7.1f}/min ({count} in {seconds:.1f} s)"


async def submit(session: aiohttp.ClientSession, url: str, **overrides: Any) -> str:
    async with session.post(f"{url}/api/v1/approvals", json=approval_body(**overrides),
                            headers={"Authorization": f"Bearer {API_TOKEN}"}) as response:
        body = await response.json()
        assert response.status == 201, body
        return str(body["id"])


async def main_async(seconds: float) -> None:
    slack = SlackEmulator()
    await slack.start()
    slack.add_channel("C1", "approvals")
    workdir = Path(tempfile.mkdtemp(prefix="signoff-client-rate-"))
    try:
        async with scratch_database("sqlite", pg_url="", workdir=workdir) as db_url, aiohttp.ClientSession() as http:
            server = signoff_server("client-rate", db_url, slack.url, workdir)
            await server.start()
            try:
                pending, nowhere = Counted(), Counted()
                started = time.monotonic()
                threads = [pending.wait(server.url, await submit(http, server.url), seconds),
                           nowhere.wait(server.url, await submit(http, server.url, channel=NOWHERE), seconds)]
                for thread in threads:
                    await asyncio.to_thread(thread.join)
                window = time.monotonic() - started
                print(f"pending        {per_minute(len(pending.sent), window)}  {pending.ended}")
                print(f"undeliverable  {per_minute(len(nowhere.sent), window)}  {nowhere.ended}")

                restart = Counted()
                began = time.monotonic()
                thread = restart.wait(server.url, await submit(http, server.url), seconds)
                await asyncio.sleep(seconds / 6)
                assert server.proc is not None
                server.proc.kill()
                server.proc.wait()
                down_at = time.monotonic()
                await asyncio.sleep(seconds / 3)
                await server.start()  # the same port and database
                up_at = time.monotonic()
                await asyncio.to_thread(thread.join)
                end = time.monotonic()
                print(f"restart: down  {per_minute(restart.between(down_at, up_at), up_at - down_at)}")
                print(f"restart: back  {per_minute(restart.between(up_at, end), end - up_at)}  {restart.ended}")
                print(f"restart: all   {per_minute(len(restart.sent), end - began)}")
            finally:
                server.stop()
    finally:
        await slack.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="each case's window (default 15)")
    args = parser.parse_args(argv)
    print(f"# requests a waiting client sends, per minute (python -m bench.client_rate --seconds {args.seconds:g})")
    asyncio.run(main_async(args.seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
