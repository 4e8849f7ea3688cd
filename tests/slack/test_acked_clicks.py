"""What Slack got an ack for survives the process (bot/slack/received.py): a burst of clicks killed with
SIGKILL the moment the last ack is back is handled in full after the restart, and a stored input that
is replayed, by one process or by two at once, is handled exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import sqlalchemy as sa

from bot.sandbox import SlackEmulator
from bot.sandbox.signed import Response, SlackClient
from storage.schema import audit_events, slack_received
from storage.stores import open_store
from tests.process.chaos import Receiver
from tests.support.app import API_TOKEN, SIGNING_SECRET, approval_body
from tests.support.process import ServerProcess
from tests.support import waits

pytestmark = pytest.mark.chaos

PEOPLE = 40
HEADERS = {"Authorization": f"Bearer {API_TOKEN}"}
ENV = {"SIGNOFF_SLACK_INBOX_LEASE_SECONDS": "1", "SIGNOFF_EGRESS_ALLOW": "127.0.0.1",
       "SIGNOFF_OUTBOX_SWEEP_SECONDS": "0.2", "SIGNOFF_LOG_LEVEL": "INFO",
       "SIGNOFF_OUTBOX_LEASE_SECONDS": "3", "SIGNOFF_HTTP_TIMEOUT_SECONDS": "2"}  # a killed process's claims lapse soon


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    fake = SlackEmulator()
    await fake.start()
    fake.add_channel("C1", "approvals")
    for i in range(1, PEOPLE + 1):
        fake.add_user(f"U{i}", f"person{i}")
    yield fake
    await fake.stop()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    hooks = Receiver()
    await hooks.start()
    yield hooks
    await hooks.stop()


async def api(session: aiohttp.ClientSession, server: ServerProcess, method: str, path: str,
              body: Any = None) -> tuple[int, Any]:
    async with session.request(method, server.url + path, json=body, headers=HEADERS) as resp:
        return resp.status, await resp.json(content_type=None)


async def cards(session: aiohttp.ClientSession, server: ServerProcess, slack: SlackEmulator,
                callback: str, n: int) -> list[tuple[str, Any]]:
    """Submit `n` requests (the i-th approved by U<i> alone); their ids and cards, once posted."""
    ids = []
    for i in range(1, n + 1):
        status, created = await api(session, server, "POST", "/api/v1/approvals",
                                    approval_body(summary=f"Burst {i}", approvers=[f"U{i}"], callback_url=callback))
        assert status == 201, created
        ids.append(created["id"])
    out = []
    for request_id in ids:
        out.append((request_id, await until(lambda r=request_id: card_of(session, server, slack, r), f"card of {request_id}")))
    return out


async def card_of(session: aiohttp.ClientSession, server: ServerProcess, slack: SlackEmulator, request_id: str) -> Any:
    _, body = await api(session, server, "GET", f"/api/v1/approvals/{request_id}")
    card = body.get("card")
    return slack.messages[(card["channel"], card["ts"])] if card else None


async def until(check: Any, what: str, timeout: float = 60.0) -> Any:
    """`waits.until` with the minute these tests of restarted server processes may take."""
    return await waits.until(check, what, timeout=timeout, every=0.05)


async def decisions_of(session: aiohttp.ClientSession, server: ServerProcess, ids: list[str]) -> dict[str, Any]:
    out = {}
    for request_id in ids:
        _, body = await api(session, server, "GET", f"/api/v1/approvals/{request_id}")
        out[request_id] = body.get("decision")
    return out


async def test_a_burst_of_acked_clicks_survives_sigkill_after_the_last_ack(
        db_url: str, slack: SlackEmulator, receiver: Receiver, tmp_path: Path) -> None:
    server = ServerProcess(db_url, slack, **ENV)
    await server.start(tmp_path)
    try:
        async with aiohttp.ClientSession() as session:
            open_cards = await cards(session, server, slack, receiver.url, PEOPLE)
            clickers = [SlackClient(server.url, SIGNING_SECRET, fake=slack) for _ in open_cards]
            try:
                acks = await asyncio.gather(*(
                    clicker.block_action(user=f"U{i}", action_id="signoff_approve", value=request_id,
                                         block_id="decide", channel=card.channel, message_ts=card.ts)
                    for i, (clicker, (request_id, card)) in enumerate(zip(clickers, open_cards), start=1)))
                server.kill()  # the moment the last ack is back: no graceful stop
            finally:
                for clicker in clickers:
                    await clicker.close()
            assert [a.status for a in acks] == [200] * PEOPLE
            server.proc = None
            await server.start(tmp_path)
            ids = [request_id for request_id, _ in open_cards]

            async def all_decided() -> dict[str, Any] | None:
                seen = await decisions_of(session, server, ids)
                return seen if all(seen.values()) else None

            seen = await until(all_decided, f"all {PEOPLE} acked clicks decided after the restart")
            for i, request_id in enumerate(ids, start=1):
                assert seen[request_id]["outcome"] == "approved"
                assert seen[request_id]["decided_by"]["id"] == f"U{i}"
            await until(lambda: _delivered(receiver, ids), "every decision's webhook delivered")
    finally:
        server.stop()
    assert all(receiver.by_request[r] == 1 for r in ids)


async def _delivered(receiver: Receiver, ids: list[str]) -> bool:
    return all(receiver.by_request[r] for r in ids)


class Captured(SlackClient):
    """Builds and signs a Slack request as SlackClient does, and keeps it instead of sending it."""

    sent: list[tuple[str, str]]

    async def post_raw(self, body: str | bytes, *, content_type: str, **_: Any) -> Response:
        self.sent = [*getattr(self, "sent", []), (body.decode() if isinstance(body, bytes) else body, content_type)]
        return Response(status=200, headers={}, text="")


async def stored_and_abandoned(db_url: str, key: str, body: str, content_type: str) -> None:
    """The row a process writes before its ack, left as if the process died right after the ack."""
    store = await open_store(db_url)
    try:
        past = datetime.now(UTC) - timedelta(seconds=5)
        async with store.unit() as unit:
            await unit.conn.execute(slack_received.insert().values(
                key=key, body=body, content_type=content_type, received_at=past, lease_until=past, attempts=1))
    finally:
        await store.close()


async def rows(db_url: str) -> list[Any]:
    store = await open_store(db_url)
    try:
        async with store.engine.connect() as conn:
            return list((await conn.execute(sa.select(slack_received))).all())
    finally:
        await store.close()


async def decided_audits(db_url: str, request_id: str) -> int:
    store = await open_store(db_url)
    try:
        async with store.engine.connect() as conn:
            return int((await conn.execute(sa.select(sa.func.count()).select_from(audit_events).where(
                audit_events.c.request_id == request_id, audit_events.c.type == "decided"))).scalar() or 0)
    finally:
        await store.close()


async def test_an_abandoned_click_is_replayed_once_by_two_processes(
        db_url: str, slack: SlackEmulator, receiver: Receiver, tmp_path: Path) -> None:
    """A click stored and acked by a process that died before handling it: the two processes running
    now both see its lease run out; exactly one handles it (one decision, one card update, one webhook)."""
    servers = [ServerProcess(db_url, slack, **ENV) for _ in range(2)]
    try:
        await servers[0].start(tmp_path)
        async with aiohttp.ClientSession() as session:
            [(request_id, card)] = await cards(session, servers[0], slack, receiver.url, 1)
            updates_before = len(slack.calls_to("chat.update"))
            capture = Captured("http://127.0.0.1:9", SIGNING_SECRET, fake=slack)
            await capture.block_action(user="U1", action_id="signoff_approve", value=request_id, block_id="decide",
                                       channel=card.channel, message_ts=card.ts)
            body, content_type = capture.sent[0]
            await asyncio.gather(servers[1].start(tmp_path),
                                 stored_and_abandoned(db_url, f"block_actions:{request_id}", body, content_type))

            async def decided() -> Any:
                _, seen = await api(session, servers[1], "GET", f"/api/v1/approvals/{request_id}")
                return seen.get("decision")

            decision = await until(decided, "the abandoned click decided")
            assert decision["outcome"] == "approved" and decision["decided_by"]["id"] == "U1"
            await until(lambda: _delivered(receiver, [request_id]), "its webhook delivered")
            await until(lambda: _all_done(db_url), "the row marked done")
    finally:
        for server in servers:
            server.stop()
    assert await decided_audits(db_url, request_id) == 1
    assert receiver.by_request[request_id] == 1
    assert len(slack.calls_to("chat.update")) - updates_before == 1  # the card shows the decision, once
    assert [e for e in slack.ephemerals if e["user"] == "U1"] == []  # nobody told "already approved"


async def _all_done(db_url: str) -> bool:
    found = await rows(db_url)
    return bool(found) and all(r.done_at is not None for r in found)


async def test_a_click_replayed_after_its_decision_committed_changes_and_says_nothing(
        db_url: str, slack: SlackEmulator, receiver: Receiver, tmp_path: Path) -> None:
    """The process decided the click and died before marking its row done: the replay finds the request
    decided by the same person, and writes, posts and delivers nothing more."""
    server = ServerProcess(db_url, slack, **ENV)
    await server.start(tmp_path)
    try:
        async with aiohttp.ClientSession() as session:
            [(request_id, card)] = await cards(session, server, slack, receiver.url, 1)
            async with SlackClient(server.url, SIGNING_SECRET, fake=slack) as clicker:
                assert (await clicker.block_action(user="U1", action_id="signoff_approve", value=request_id,
                                                   block_id="decide", channel=card.channel,
                                                   message_ts=card.ts)).status == 200

            async def decided() -> Any:
                _, seen = await api(session, server, "GET", f"/api/v1/approvals/{request_id}")
                return seen.get("decision")

            await until(decided, "the click decided")
            await until(lambda: _delivered(receiver, [request_id]), "its webhook delivered")
            await until(lambda: _all_done(db_url), "the click's row marked done")
            updates = len(slack.calls_to("chat.update"))
            [stored] = await rows(db_url)
            # As if the process had died between the decision's commit and the row's done mark:
            store = await open_store(db_url)
            try:
                async with store.unit() as unit:
                    await unit.conn.execute(slack_received.update().values(
                        done_at=None, lease_until=datetime.now(UTC) - timedelta(seconds=5)))
            finally:
                await store.close()
            await until(lambda: _all_done(db_url), "the replayed row marked done")
            assert len(await rows(db_url)) == 1 and stored.key == (await rows(db_url))[0].key
    finally:
        server.stop()
    assert await decided_audits(db_url, request_id) == 1
    assert receiver.by_request[request_id] == 1
    assert len(slack.calls_to("chat.update")) == updates
    assert [e for e in slack.ephemerals if e["user"] == "U1"] == []
    assert "replaying a Slack input" in (server.log_path.read_text() if server.log_path else "")


async def test_an_event_slack_sends_again_is_handled_once(
        db_url: str, slack: SlackEmulator, tmp_path: Path) -> None:
    """Slack resends an event whose ack it missed (same event_id): stored once, handled once."""
    server = ServerProcess(db_url, slack, **ENV)
    await server.start(tmp_path)
    try:
        async with SlackClient(server.url, SIGNING_SECRET, fake=slack) as client:
            for retry in (None, 1):
                answer = await client.event({"type": "app_mention", "user": "U1", "channel": "C1", "text": "<@UBOT>",
                                             "ts": "1700000000.000100"}, event_id="Ev0RETRY1", retry_num=retry)
                assert answer.status == 200

        async def answered() -> list[Any]:
            return [e for e in slack.ephemerals if e["user"] == "U1"]

        await until(answered, "the mention answered")
        await until(lambda: _all_done(db_url), "the event's row marked done")
    finally:
        server.stop()
    assert len([e for e in slack.ephemerals if e["user"] == "U1"]) == 1


async def test_socket_mode_clicks_acked_before_a_sigkill_are_decided_after_the_restart(
        db_url: str, slack: SlackEmulator, receiver: Receiver, tmp_path: Path) -> None:
    """The same over Socket Mode: an envelope's ack goes back only once its click is stored."""
    clicks = 10
    server = ServerProcess(db_url, slack, SLACK_APP_TOKEN="xapp-test", **ENV)
    await server.start(tmp_path)
    try:
        async with aiohttp.ClientSession() as session:
            open_cards = await cards(session, server, slack, receiver.url, clicks)
            await asyncio.wait_for(slack.socket_mode.connected.wait(), 30)
            acks = await asyncio.gather(*(slack.socket_mode.send("interactive", {
                "type": "block_actions", "user": {"id": f"U{i}", "name": f"person{i}"}, "team": {"id": "T1"},
                "api_app_id": "A1", "trigger_id": f"socket-trigger-{i}",
                "container": {"type": "message", "message_ts": card.ts, "channel_id": card.channel},
                "channel": {"id": card.channel},
                "actions": [{"action_id": "signoff_approve", "block_id": "decide", "type": "button",
                             "value": request_id, "action_ts": "1"}],
            }) for i, (request_id, card) in enumerate(open_cards, start=1)))
            server.kill()
            assert all("envelope_id" in a for a in acks)
            server.proc = None
            await server.start(tmp_path)
            ids = [request_id for request_id, _ in open_cards]

            async def all_decided() -> dict[str, Any] | None:
                seen = await decisions_of(session, server, ids)
                return seen if all(seen.values()) else None

            seen = await until(all_decided, f"all {clicks} acked Socket Mode clicks decided after the restart")
            assert [seen[r]["decided_by"]["id"] for r in ids] == [f"U{i}" for i in range(1, clicks + 1)]
    finally:
        server.stop()
