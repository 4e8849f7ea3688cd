"""A resumer woken by Signoff's signed decision webhook instead of long-polls, and the receiver's checks.

The app may call back to loopback (SIGNOFF_EGRESS_ALLOW=127.0.0.1); each resumer scans only every
60 s, so only the webhook can wake it within these tests' time. The receiver accepts exactly what
the server signs (bot.api.webhooks.sign, the server's own) and nothing else.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.api.longpoll import LIMITS
from bot.api.webhooks import sign as server_sign
from signoff import AsyncSignoffClient, SignoffClient
from signoff.langgraph import AsyncResumer, Resumer
from signoff.webhook import WebhookReceiver
from tests.approvals.batch_steps import approve_selected
from tests.client.lg_async_graphs import async_graph
from tests.client.lg_graphs import calls, hitl_agent, saver
from tests.client.test_langgraph import CARD, decided, thread
from tests.support.waits import until
from tests.client.test_langgraph_async import sqlite_saver
from tests.support.app import API_TOKEN, WEBHOOK_SECRET, App


pytestmark = pytest.mark.settings(SIGNOFF_EGRESS_ALLOW="127.0.0.1")  # the receivers listen on loopback


@pytest.fixture
def receiver() -> Any:
    with WebhookReceiver(WEBHOOK_SECRET) as started:
        yield started


@pytest.fixture
def env(app: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: WebhookReceiver) -> None:
    for name, value in {"SIGNOFF_URL": app.url, "SIGNOFF_TOKEN": API_TOKEN, "LG_CALLS": str(tmp_path / "calls.jsonl"),
                        "LG_HOOK_URL": receiver.url}.items():
        monkeypatch.setenv(name, value)


def held_long_polls(app: App) -> int:
    assert app.signoff is not None
    return int(app.signoff.web_app[LIMITS].held)


async def test_a_resumer_is_woken_by_the_webhook_of_the_cards_it_posts(
        app: App, env: None, tmp_path: Path, receiver: WebhookReceiver) -> None:
    db, config = str(tmp_path / "checkpoints.db"), thread("hook-1")
    await asyncio.to_thread(hitl_agent(saver(db)).invoke, {"messages": [{"role": "user", "content": "tidy"}]}, config)
    with SignoffClient(app.url, API_TOKEN) as client:
        resumer = Resumer(hitl_agent, saver(db), client=client, webhook=receiver, scan_every=60, **CARD)
        stop = threading.Event()
        running = asyncio.create_task(asyncio.to_thread(resumer.run, stop=stop))
        try:
            await until(lambda: bool(resumer.resuming.waiting))  # it posted the card and waits
            [batch_id] = resumer.resuming.waiting
            _, batch = await app.api("GET", f"/api/v1/approvals/{batch_id}")
            assert batch["callback_url"] == receiver.url
            assert held_long_polls(app) == 0  # it waits on the webhook, not on long-polls
            await approve_selected(app, batch_id, [0, 1])
            await decided(app, batch_id)
            await until(lambda: len(calls()) == 2, timeout=20)  # well inside the 60 s scan
        finally:
            stop.set()
            await running
            resumer.close()
    assert receiver.count == 1 and receiver.refused == 0 and batch_id in receiver.decided
    assert not hitl_agent(saver(db)).get_state(config).next


async def test_an_async_resumer_is_woken_by_the_webhook_aapproval_asked_for(
        app: App, env: None, tmp_path: Path, receiver: WebhookReceiver) -> None:
    config = thread("hook-async")
    async with sqlite_saver(tmp_path / "checkpoints.db") as checkpointer, \
            AsyncSignoffClient(app.url, API_TOKEN) as client:
        result = await async_graph(checkpointer).ainvoke({"to": "e@example.com"}, config)
        request_id = result["__interrupt__"][0].value["signoff"]["request_id"]
        resumer = AsyncResumer(async_graph, checkpointer, client=client, webhook=receiver, scan_every=60)
        stop = asyncio.Event()
        running = asyncio.create_task(resumer.run(stop=stop))
        try:
            await until(lambda: request_id in resumer.resuming.waiting)
            assert held_long_polls(app) == 0
            await app.click(request_id, "U1", user_name="alice")
            await until(lambda: len(calls()) == 1, timeout=20)
        finally:
            stop.set()
            await asyncio.wait_for(running, 10)
            await resumer.aclose()
    assert calls() == [{"tool": "send_email", "args": {"to": "e@example.com", "subject": "Your refund"}}]
    assert receiver.count == 1


async def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    data = io.BytesIO(body)  # with its length: aiohttp sends Content-Length
    async with aiohttp.ClientSession() as session, session.post(url, data=data, headers=headers) as response:
        return response.status, await response.json(content_type=None)


def signed(body: bytes, *, at: float | None = None, secret: str = WEBHOOK_SECRET, delivery: str = "d-1") -> dict[str, str]:
    stamp = str(int(time.time() if at is None else at))
    return {"Content-Type": "application/json", "X-Signoff-Timestamp": stamp, "X-Signoff-Delivery": delivery,
            "X-Signoff-Signature": server_sign(secret, stamp, body)}


async def test_the_receiver_counts_only_fresh_deliveries_the_server_signed_once_each(receiver: WebhookReceiver) -> None:
    body = json.dumps({"type": "approval.decided", "request": {"id": "apr_1", "status": "approved"}}).encode()
    refused = [
        await post(receiver.url, body, signed(body, secret="someone-else's")),  # not the server's secret
        await post(receiver.url, body, signed(body, at=time.time() - 600)),  # stale: a replay from long ago
        await post(receiver.url, body.replace(b"approved", b"rejected"), signed(body)),  # changed on the way
        await post(receiver.url, body, {"Content-Type": "application/json"}),  # not signed at all
    ]
    assert [status for status, _ in refused] == [401] * 4
    assert receiver.count == 0 and receiver.refused == 4
    assert not receiver.wait_beyond(0, 0.05)
    assert await post(receiver.url, body, signed(body)) == (200, {"status": "ok"})
    assert await post(receiver.url, body, signed(body)) == (200, {"status": "ok"})  # a retry of delivery d-1
    assert receiver.count == 1 and receiver.decided["apr_1"]["status"] == "approved"
    assert receiver.wait_beyond(0, 0.05) and await receiver.await_beyond(0, 0.05)
    assert not await receiver.await_beyond(1, 0.05)
    other = json.dumps({"type": "run.updated"}).encode()
    assert await post(receiver.url, other, signed(other, delivery="d-2")) == (200, {"status": "ignored"})
    assert receiver.count == 1
    assert (await post(receiver.url.replace("/signoff/webhook", "/elsewhere"), body, signed(body)))[0] == 404
    assert await status_of_headers(receiver, f"Content-Length: {1024 * 1024 + 1}") == 413  # not read at all
    assert await status_of_headers(receiver, "Transfer-Encoding: chunked") == 411


async def status_of_headers(receiver: WebhookReceiver, header: str) -> int:
    """The status the receiver answers a POST's head with, before any body is sent."""
    host, port = receiver.url.split("//")[1].split("/")[0].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"POST /signoff/webhook HTTP/1.1\r\nHost: {host}\r\n{header}\r\n\r\n".encode())
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    writer.close()
    return status


def test_a_receiver_without_the_secret_is_refused() -> None:
    from signoff import SignoffError

    with pytest.raises(SignoffError, match="SIGNOFF_WEBHOOK_SECRET"):
        WebhookReceiver("")
