"""Small helpers shared by the timer scenario tests."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.fakes.clock import FakeClock
from bot.sandbox import Call, SlackEmulator
from tests.support.app import App
from tests.support.outbox import settle

SLACK_EFFECTS = ("chat.postMessage", "chat.update", "chat.getPermalink", "chat.postEphemeral", "views.publish")


async def tick(app: App, clock: FakeClock, **delta: float) -> None:
    """Move the clock, run the sweep the scheduler runs, deliver what it enqueued."""
    assert app.signoff is not None and app.signoff.timers is not None
    await settle(app)  # never move time under an item in flight (its lease is in clock time)
    clock.advance(**delta)
    await app.signoff.timers.sweep()
    await settle(app)


def effects(slack: SlackEmulator, since: int = 0) -> list[Call]:
    return [c for c in slack.calls[since:] if c.method in SLACK_EFFECTS]


def describe(call: Call, card_ts: str | None = None) -> tuple[str, str]:
    """(method, where): "thread", "card", "dm:U..", "C1" ... for readable sequence assertions."""
    args = call.args
    if call.method == "chat.postMessage":
        if args.get("thread_ts"):
            return call.method, "thread" if args["thread_ts"] == card_ts else f"thread:{args['thread_ts']}"
        channel = str(args.get("channel"))
        return call.method, f"dm:{channel}" if channel[:1] in "UW" else channel
    if call.method in ("chat.update", "chat.getPermalink"):
        return call.method, "card" if args.get("ts", args.get("message_ts")) == card_ts else "other"
    if call.method == "chat.postEphemeral":
        return call.method, f"to:{args.get('user')}"
    return call.method, str(args.get("user_id", ""))


def context_texts(blocks: list[dict[str, Any]]) -> list[str]:
    return [e.get("text", "") for b in blocks if b["type"] == "context" for e in b["elements"]]


TIMELINE = {
    "reminders": {"every": "10m", "max": 2},
    "escalation": {"levels": [{"after": "30m", "notify": ["UMGR"]}]},
    "timeout": {"after": "60m", "outcome": "expire"},
}
