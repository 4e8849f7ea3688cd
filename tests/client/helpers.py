"""Helpers shared by the agent-side integration tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.sandbox import SlackEmulator
from tests.support.app import API_TOKEN, ROOT, App
from tests.support.outbox import settle
from tests.support.waits import until


def agent_process_env(app: App, calls_var: str, calls: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """What an agent process has: where Signoff is, and (`calls_var`) the file its tools record their calls in;
    set in this process too, and returned whole for a subprocess."""
    env = {"SIGNOFF_URL": app.url, "SIGNOFF_TOKEN": API_TOKEN, calls_var: str(calls)}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return {**os.environ, **env, "PYTHONPATH": str(ROOT)}


async def pending_id(app: App) -> str:
    """The id of the one pending request, once the server has it (the agent runs in a thread or a process)."""
    async def pending() -> list[str]:
        _, listing = await app.api("GET", "/api/v1/approvals?status=pending")
        return [str(item["id"]) for item in listing["items"]]

    [found] = await until(pending, "the agent's request to be pending", timeout=30)
    return found


def cards(slack: SlackEmulator) -> int:
    """How many top-level messages (cards) were posted."""
    return sum(1 for c in slack.calls if c.method == "chat.postMessage" and not c.args.get("thread_ts"))


async def cards_once_posted(app: App, *request_ids: str) -> int:
    """How many cards were posted, counted once each named request's card is stored: the outbox posts
    a card after the submit's answer, so counting straight after a submit races it."""
    for request_id in request_ids:
        await app.card(request_id)
    return cards(app.slack)


async def cards_once_settled(app: App) -> int:
    """How many cards were posted once the outbox has delivered all that is due: for counts that must
    also show that no further card is coming (a card still in the outbox would otherwise be missed)."""
    await settle(app)
    return cards(app.slack)


async def next_pending(app: App, after: str) -> str:
    """The id of the one pending request other than `after` (decided just now: its decision may still be
    being written when the click's ack arrives)."""
    async def others() -> list[str]:
        _, listing = await app.api("GET", "/api/v1/approvals?status=pending")
        return [str(i["id"]) for i in listing["items"] if i["id"] != after]

    [found] = await until(others, f"a pending request other than {after}", timeout=30)
    return found


async def receipt(app: App, request_id: str) -> dict:
    """The request as the agent API shows it after the click: `outcome` (what ran) and `outcome_status`."""
    status, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert status == 200, body
    return dict(body)


async def card_text(app: App, request_id: str) -> str:
    """The card's blocks as text, once the outbox delivered everything due (a receipt updates the card)."""
    import json

    from tests.support.outbox import settle

    await settle(app)
    return json.dumps((await app.card(request_id)).blocks, ensure_ascii=False)
