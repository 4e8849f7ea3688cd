"""Driving agent runs from a test: start, watch, click, reply, through the real HTTP boundaries."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.sandbox.model import FakeAnthropic
from bot.sandbox import Message
from tests.support.app import App
from tests.support.waits import until


@dataclass
class AgentApp:
    app: App
    model: FakeAnthropic
    tmp: Path

    @property
    def slack(self) -> Any:
        return self.app.slack

    @property
    def outbox(self) -> Path:
        return self.tmp / "outbox"

    @property
    def workspace(self) -> Path:
        return self.tmp / "workspace"

    def emails(self) -> list[Path]:
        return sorted(self.outbox.glob("*.eml")) if self.outbox.exists() else []

    async def start(self, task: str, channel: str = "C1", **extra: Any) -> dict[str, Any]:
        status, body = await self.app.api("POST", "/api/v1/runs", json={"task": task, "channel": channel, **extra})
        assert status == 201, body
        return body

    async def run(self, run_id: str) -> dict[str, Any]:
        status, body = await self.app.api("GET", f"/api/v1/runs/{run_id}")
        assert status == 200, body
        return body

    async def wait(self, run_id: str, cond: Callable[[dict[str, Any]], bool], timeout: float = 30.0) -> dict[str, Any]:
        """Poll the run (test side only) until `cond` holds."""
        async def there() -> dict[str, Any] | None:
            body = await self.run(run_id)
            return body if cond(body) else None

        return await until(there, f"run {run_id} to get there", timeout=timeout)

    async def wait_status(self, run_id: str, *statuses: str, timeout: float = 30.0) -> dict[str, Any]:
        return await self.wait(run_id, lambda r: r["status"] in statuses, timeout)

    async def waiting_calls(self, run_id: str, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Wait until the run waits for `count` decisions; return those tool calls."""
        body = await self.wait(run_id, lambda r: r["status"] == "waiting"
                               and sum(c["status"] == "waiting" for c in r["tool_calls"]) >= count, timeout)
        return [c for c in body["tool_calls"] if c["status"] == "waiting"]

    async def root(self, run_id: str) -> Message:
        body = await self.wait(run_id, lambda r: r["root"] is not None)
        return self.slack.messages[(body["root"]["channel"], body["root"]["ts"])]

    def thread(self, root: Message) -> list[Message]:
        return self.slack.channel_messages(root.channel, thread_ts=root.ts)

    async def thread_reply(self, root: Message, user: str, text: str, **event: Any) -> Any:
        msg = self.slack.add_message(root.channel, user, text, thread_ts=root.ts)
        body = {"type": "message", "channel": root.channel, "user": user, "text": text, "ts": msg.ts,
                "thread_ts": root.ts, "channel_type": "channel", "event_ts": msg.ts, **event}
        return await self.app.slack_client.event(body)
