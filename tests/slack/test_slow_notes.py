"""A slow Slack answering refusal notes never holds up other people's decisions (issue 9, defect 6)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest_asyncio

from bot.sandbox import SlackEmulator as FakeSlack
from tests.harness import App, start_app


@pytest_asyncio.fixture
async def patient(db_url: str, slack: FakeSlack) -> AsyncIterator[App]:
    """Slack calls may take a minute before they time out: a held slot would show as a stuck decision."""
    running = await start_app(db_url, slack, SIGNOFF_HTTP_TIMEOUT_SECONDS="60", SIGNOFF_OUTBOX_LEASE_SECONDS="120")
    try:
        yield running
    finally:
        await running.stop()


async def status(app: App, request_id: str) -> str:
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    return str(body["status"])


async def test_hung_refusal_notes_do_not_block_another_decision(patient: App) -> None:
    app, slack = patient, patient.slack
    guarded = await app.submit(approvers=["U1"])
    other = await app.submit(approvers=["U2"], summary="Another request")
    await app.card(guarded["id"])
    await app.card(other["id"])
    slack.hang("chat.postEphemeral", times=8)  # every refusal note hangs until released
    try:
        for _ in range(8):  # more refused clicks than decision slots
            await app.click(guarded["id"], "UOUT", user_name="mallory")
        await slack.wait_for("chat.postEphemeral", count=8, timeout=20, ok_only=False)  # all eight stuck in Slack
        await app.click(other["id"], "U2", user_name="bob")
        for _ in range(2000):  # test-side wait for the stored decision
            if await status(app, other["id"]) == "approved":
                break
            await asyncio.sleep(0.01)
        assert await status(app, other["id"]) == "approved"
        assert await status(app, guarded["id"]) == "pending"
    finally:
        slack.release_hung()
