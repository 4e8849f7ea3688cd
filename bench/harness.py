"""What the benchmarks share: the secrets they configure, a request body, and Signoff on loopback.

Benchmarks never import tests/ (the suite's harness may change for its own reasons); the Slack side
is the sandbox emulator, `bot.sandbox`, which the tests use too.
"""

from __future__ import annotations

import asyncio
import atexit
import fcntl
import random
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import aiohttp
from aiohttp import web

from bot.sandbox import SlackEmulator
from bot.sandbox.signed import SlackClient
from bot.process.settings import Settings
from bot.process.app import build
from storage.sql import SqlStore

SIGNING_SECRET = "bench-signing-secret"
API_TOKEN = "bench-api-token-1"
# The bench measures throughput from one token: the per-token submit cap (a 429 past 10 a second)
# would measure the cap instead. bench.abuse measures the cap itself.
UNCAPPED = {"SIGNOFF_SUBMIT_RATE_PER_TOKEN": "100000", "SIGNOFF_SUBMIT_BURST_PER_TOKEN": "1000000",
            "SIGNOFF_MAX_PENDING_PER_TOKEN": "100000000"}
WEBHOOK_SECRET = "bench-webhook-secret"


def approval_body(**overrides: Any) -> dict[str, Any]:
    """A high-risk email approval for U1/U2 in C1, with a preview, like an agent's."""
    body: dict[str, Any] = {
        "action": {"name": "send_email",
                   "params": {"to": "customer@example.com", "subject": "Your refund", "body": "Hello,\nrefund sent."}},
        "summary": "Send the refund email to customer@example.com",
        "context": "The customer asked twice; policy allows refunds under $100.",
        "preview": {"kind": "email", "to": ["customer@example.com"], "subject": "Your refund",
                    "body": "Hello,\nrefund sent."},
        "risk": "high", "channel": "C1", "approvers": ["U1", "U2"], "requested_by": "support-agent",
    }
    body.update(overrides)
    return body


PORTS = range(20000, 32000)  # below Linux's ephemeral range (32768-60999): no outgoing socket is given one
_held: list[IO[bytes]] = []  # this process's port reservations, released when it exits
atexit.register(lambda: [lock.close() for lock in _held])


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on and no other test or bench process will be given.

    A port the OS hands out (bind to 0) is free only for the moment: a test that restarts a server on
    its port could find it taken by another suite's server or by any outgoing connection. These ports
    lie outside the ephemeral range, and each is reserved by an exclusive lock on a file that this
    process holds until it exits, so two suites running at once never share one.
    """
    folder = Path(tempfile.gettempdir()) / "signoff-test-ports"
    folder.mkdir(exist_ok=True)
    for port in random.sample(PORTS, min(200, len(PORTS))):
        lock = open(folder / str(port), "ab")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # some other program listens there: keep the lock, so nobody tries it again
                _held.append(lock)
                continue
        _held.append(lock)
        return port
    raise RuntimeError(f"no free port found in {PORTS}")


async def wait_until_healthy(proc: subprocess.Popen[bytes], url: str, log_path: Path, *, tries: int = 600) -> None:
    """Until `url`/healthz answers 200; raises (with the log's tail) if the process dies or never answers."""
    async with aiohttp.ClientSession() as session:
        for _ in range(tries):
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args} exited early:\n{log_path.read_text()[-4000:]}")
            try:
                async with session.get(url + "/healthz") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)  # waiting for a process to start listening
    raise RuntimeError(f"{proc.args} did not come up:\n{log_path.read_text()[-4000:]}")


@dataclass
class InProcessApp:
    """Signoff served in the bench's own process, with an agent-API session and a signed Slack client."""

    url: str
    slack: SlackEmulator
    session: aiohttp.ClientSession
    slack_client: SlackClient
    runner: web.AppRunner

    async def submit(self, **overrides: Any) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {API_TOKEN}"}
        async with self.session.post(self.url + "/api/v1/approvals", json=approval_body(**overrides),
                                     headers=headers) as resp:
            body: dict[str, Any] = await resp.json()
            if resp.status != 201:
                raise RuntimeError(f"submit answered {resp.status}: {body}")
        while True:  # until the outbox posted the card
            async with self.session.get(self.url + f"/api/v1/approvals/{body['id']}", headers=headers) as resp:
                got: dict[str, Any] = await resp.json()
            if got.get("card"):
                return got
            await asyncio.sleep(0.005)  # bench-side only: the app itself is never polled

    async def click(self, request: dict[str, Any], user: str, action: str = "signoff_approve", **kw: Any) -> Any:
        card = request["card"]
        return await self.slack_client.block_action(user=user, action_id=action, value=request["id"],
                                                    block_id="decide", channel=card["channel"],
                                                    message_ts=card["ts"], **kw)

    async def stop(self) -> None:
        await self.slack_client.close()
        await self.session.close()
        await self.runner.cleanup()


def settings_for(db_url: str, slack: SlackEmulator, **extra: str) -> Settings:
    """The in-process app's settings: the fake Slack, the bench's tokens and secrets, `db_url`, and
    `extra` settings (SIGNOFF_SLACK_CHANNEL_PACE_SECONDS="0", say)."""
    env = {"SLACK_BOT_TOKEN": slack.bot_token, "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": slack.url,
           "DATABASE_URL": db_url, "SIGNOFF_API_TOKENS": API_TOKEN, "SIGNOFF_WEBHOOK_SECRET": WEBHOOK_SECRET, **UNCAPPED, **extra}
    return Settings.from_env(env, dotenv=None)


async def start_app(db_url: str, slack: SlackEmulator, *, store: SqlStore | None = None,
                    **extra: str) -> InProcessApp:
    """Signoff on loopback in this process; `store`: one the caller opened (to watch its engines);
    `extra`: more settings (`settings_for`)."""
    signoff = await build(settings_for(db_url, slack, **extra), store=store)
    runner = web.AppRunner(signoff.web_app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    return InProcessApp(url, slack, aiohttp.ClientSession(), SlackClient(url, SIGNING_SECRET, fake=slack), runner)
