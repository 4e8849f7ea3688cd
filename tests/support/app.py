"""The running app, reached over real HTTP on 127.0.0.1: in this process, or as `signoff serve` subprocesses."""

from __future__ import annotations

import asyncio
import contextlib
import json as json_module
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp import web

from bot.process.clock import Clock
from bot.process.serve import app_runner, ask_slack, learn_slack
from bot.approvals.keys import new_seed
from bot.process.settings import Settings
from bot.process.app import build
from bot.process.lifecycle import Signoff
from bot.sandbox import SlackEmulator
from bot.sandbox.signed import SlackClient

SIGNING_SECRET = "test-signing-secret"
API_TOKEN = "test-api-token-1"
WEBHOOK_SECRET = "test-webhook-secret"
ROOT = Path(__file__).resolve().parents[2]


# One decision-signing key for every server this test process starts (made here, never stored): the
# agent side pins a key per process, and in-process tests start many servers on many databases. Tests
# of the key made on first start pass SIGNOFF_SIGNING_KEY="" (tests/api/test_signed_decisions.py).
TEST_SIGNING_KEY = new_seed()


def app_env(db_url: str, slack: SlackEmulator, **extra: str) -> dict[str, str]:
    return {
        "SIGNOFF_SIGNING_KEY": TEST_SIGNING_KEY,
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": slack.url,
        "DATABASE_URL": db_url,
        "SIGNOFF_API_TOKENS": API_TOKEN,
        "SIGNOFF_WEBHOOK_SECRET": WEBHOOK_SECRET,
        # Slack's per-channel pace (one post a second) would make every multi-card test slow; the
        # pacing tests (tests/slack/test_pace.py) set it themselves.
        "SIGNOFF_SLACK_CHANNEL_PACE_SECONDS": "0",
        # Bursts of hundreds of submits from the one test token; the caps' own tests set them.
        "SIGNOFF_SUBMIT_BURST_PER_TOKEN": "100000",
        # Many tests leave several alike requests pending: the similar-requests card would add a message to
        # their sweeps. Its own tests (tests/approvals/test_similar_requests.py) turn it on.
        "SIGNOFF_SIMILAR_MIN": "0",
        **extra,
    }


def approval_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "action": {
            "name": "send_email",
            "params": {"to": "customer@example.com", "subject": "Your refund", "body": "Hello,\nrefund sent."},
        },
        "summary": "Send the refund email to customer@example.com",
        "context": "The customer asked twice; policy allows refunds under $100.",
        "preview": {"kind": "email", "to": ["customer@example.com"], "subject": "Your refund",
                    "body": "Hello,\nrefund sent."},
        "risk": "high",
        "channel": "C1",
        "approvers": ["U1", "U2"],
        "requested_by": "support-agent",
    }
    body.update(overrides)
    return body


def tool_body(name: str, params: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """A request for a call of tool `name` with `params` and no preview (what policy rules match on)."""
    return approval_body(action={"name": name, "params": params}, preview=None, **overrides)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def submit_body(app: App, body: dict[str, Any], *, token: str | None = None) -> dict[str, Any]:
    """POST `body` as `token`'s agent (the app's own token by default); it must be accepted (201)."""
    status, created = await app.api("POST", "/api/v1/approvals", json=body, headers=bearer(token) if token else None)
    assert status == 201, created
    return dict(created)


async def submit_tool(app: App, name: str, params: dict[str, Any], *, token: str | None = None,
                      **overrides: Any) -> dict[str, Any]:
    """Submit a call of tool `name` with `params` (`tool_body`); it must be accepted (201)."""
    return await submit_body(app, tool_body(name, params, **overrides), token=token)


@dataclass
class App:
    """A running Signoff reachable over HTTP, with clients for the agent API and for Slack."""

    url: str
    slack: SlackEmulator
    session: aiohttp.ClientSession
    slack_client: SlackClient
    signoff: Signoff | None = None
    runner: web.AppRunner | None = None
    headers: dict[str, str] = field(default_factory=lambda: {"Authorization": f"Bearer {API_TOKEN}"})

    async def api(self, method: str, path: str, *, json: Any = None, data: Any = None,
                  headers: dict[str, str] | None = None, auth: bool = True) -> tuple[int, Any]:
        hdrs = dict(self.headers if auth else {})
        hdrs.update(headers or {})
        async with self.session.request(method, self.url + path, json=json, data=data, headers=hdrs) as resp:
            text = await resp.text()
            try:
                return resp.status, json_module.loads(text)
            except ValueError:
                return resp.status, text

    async def submit(self, **overrides: Any) -> dict[str, Any]:
        """The harness's default request (`approval_body`) with `overrides`; it must be accepted (201)."""
        return await submit_body(self, approval_body(**overrides))

    async def card(self, request_id: str, timeout: float = 5.0) -> Any:
        """Wait for the request's card to be posted and stored; return the fake's message."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            status, body = await self.api("GET", f"/api/v1/approvals/{request_id}")
            if body.get("card"):
                return self.slack.messages[(body["card"]["channel"], body["card"]["ts"])]
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"no card stored for {request_id}: {body}")
            await asyncio.sleep(0.01)  # test-side only: the app itself is never polled for this

    async def click(self, request_id: str, user: str, action: str = "signoff_approve", **kw: Any) -> Any:
        card = await self.card(request_id)
        return await self.slack_client.block_action(
            user=user, action_id=action, value=request_id, block_id="decide", channel=card.channel,
            message_ts=card.ts, **kw,
        )

    async def stop(self) -> None:
        await self.slack_client.close()
        await self.session.close()
        if self.runner is not None:
            await self.runner.cleanup()


class ShiftedClock:
    """The system clock plus an offset a test can move forward: due retries fall due at once."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)


async def start_app(db_url: str, slack: SlackEmulator, *, clock: Clock | None = None, **env: str) -> App:
    """Build and serve the app in this process, started as `signoff serve` starts it: Slack's auth.test is
    asked first and what it says is kept (so no Slack request waits for it, or is refused meanwhile; an
    emulator failing auth.test starts it not knowing, as serve would). `clock` replaces the system clock
    (e.g. ShiftedClock)."""
    settings = Settings.from_env(app_env(db_url, slack, **env), dotenv=None)
    said = await ask_slack(settings)
    signoff = await build(settings, clock=clock)
    learn_slack(signoff, said)
    runner = app_runner(signoff.web_app, settings)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    url = f"http://127.0.0.1:{port}"
    return App(url, slack, aiohttp.ClientSession(), SlackClient(url, SIGNING_SECRET, fake=slack), signoff, runner)


@contextlib.asynccontextmanager
async def policy_app(db_url: str, slack: SlackEmulator, tmp_path: Path, policy: str, *, clock: Clock | None = None,
                     **env: str) -> AsyncIterator[App]:
    """The app under a policy file (`SIGNOFF_POLICY`) whose text is `policy` (on `clock`, as `start_app`);
    stopped at the end."""
    path = tmp_path / "policy.yaml"
    path.write_text(policy)
    running = await start_app(db_url, slack, clock=clock, SIGNOFF_POLICY=str(path), **env)
    try:
        yield running
    finally:
        await running.stop()
