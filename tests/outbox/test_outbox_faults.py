"""Slack misbehaves (429 with Retry-After, 500s, hangs) and the process dies: the card still ends up
posted exactly once and updated exactly once. Crash tests run `signoff serve` as real subprocesses
and SIGKILL them between two steps."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.sandbox import SlackEmulator
from tests.support.app import API_TOKEN, SIGNING_SECRET, App, approval_body, start_app
from tests.support.process import ServerProcess
from bot.sandbox.signed import SlackClient
from tests.support.waits import long_poll_registered, more_sweeps, until

AUTH = {"Authorization": f"Bearer {API_TOKEN}"}
# Short lease so a restarted process may take over a dead one's delivery within the test.
CRASH_ENV = {"SIGNOFF_OUTBOX_LEASE_SECONDS": "1.5", "SIGNOFF_HTTP_TIMEOUT_SECONDS": "1",
             "SIGNOFF_OUTBOX_SWEEP_SECONDS": "0.5"}


def cards_for(slack: SlackEmulator, request_id: str) -> list[Any]:
    return [m for m in slack.channel_messages("C1")
            if ((m.metadata or {}).get("event_payload") or {}).get("request_id") == request_id]


async def test_429_twice_then_ok_posts_exactly_one_card(app: App) -> None:
    app.slack.fail("chat.postMessage", status=429, retry_after=1, times=2)
    req = await app.submit()
    card = await app.card(req["id"], timeout=10)
    calls = app.slack.calls_to("chat.postMessage")
    assert [c.status for c in calls] == [429, 429, 200]
    # Retry-After was honoured: each retry came at least a second after the 429.
    assert calls[1].at - calls[0].at >= 0.95 and calls[2].at - calls[1].at >= 0.95
    assert cards_for(app.slack, req["id"]) == [card]
    assert app.signoff is not None
    assert ("chat.postMessage", "429") in _error_labels(app)


async def test_server_errors_are_retried_and_never_duplicate_the_card(app: App) -> None:
    app.slack.fail("chat.postMessage", status=500, times=3)
    req = await app.submit()
    card = await app.card(req["id"], timeout=15)
    assert [c.status for c in app.slack.calls_to("chat.postMessage")] == [500, 500, 500, 200]
    # A 500 leaves it unknown whether Slack posted: each retry first looked for an earlier card.
    assert len(app.slack.calls_to("conversations.history", ok_only=True)) == 3
    assert cards_for(app.slack, req["id"]) == [card]
    audit = [e.type for e in await app.signoff.store.audit_events(req["id"])]  # type: ignore[union-attr]
    assert audit == ["created", "posted"]


async def test_permanent_slack_error_gives_up_and_audits(app: App) -> None:
    app.slack.error("chat.postMessage", "channel_not_found")
    req = await app.submit()
    assert app.signoff is not None
    await app.signoff.dispatcher.drain()
    [item] = [i for i in await app.signoff.store.outbox_items(req["id"]) if i.kind == "slack.post_card"]
    assert item.status == "dead" and "channel_not_found" in (item.last_error or "")
    audit = await app.signoff.store.audit_events(req["id"])
    assert audit[-1].type == "post_failed" and "channel_not_found" in audit[-1].data["error"]
    # The request itself is kept (the agent may cancel it), marked with why nobody can see it.
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}")
    assert body["status"] == "pending" and body["delivery"]["error"] == "channel_not_found"


async def test_uncertain_post_in_a_public_channel_the_bot_is_not_in_still_posts_one_card(
    db_url: str, slack: SlackEmulator
) -> None:
    # chat:write.public lets the bot post where it is not a member, but not read the history it
    # needs to find a card an unanswered attempt already posted: it joins, then looks.
    slack.add_channel("CPUB", "public-approvals", bot_member=False)
    slack.hang("chat.postMessage", apply=True)  # Slack posts the card; its answer never arrives
    app = await start_app(db_url, slack, SIGNOFF_HTTP_TIMEOUT_SECONDS="1")
    try:
        req = await app.submit(channel="CPUB")
        stored = await app.card(req["id"], timeout=20)
        cards = [m for m in slack.channel_messages("CPUB")
                 if ((m.metadata or {}).get("event_payload") or {}).get("request_id") == req["id"]]
        assert cards == [stored]  # the card the unanswered attempt posted, found and kept
        assert len(slack.calls_to("chat.postMessage")) == 1  # the unanswered one: never posted again
        history = slack.calls_to("conversations.history", ok_only=False)
        assert [c.response.get("error") for c in history] == ["not_in_channel", None]
        assert len(slack.calls_to("conversations.join", ok_only=True)) == 1
    finally:
        slack.release_hung()
        await app.stop()


async def test_joined_but_still_refused_the_search_waits_and_never_posts_twice(
    db_url: str, slack: SlackEmulator
) -> None:
    # Slack may take a moment to let a bot that just joined read the channel: look again later.
    slack.add_channel("CPUB", "public-approvals", bot_member=False)
    slack.hang("chat.postMessage", apply=True)
    slack.error("conversations.history", "not_in_channel", times=2)
    app = await start_app(db_url, slack, SIGNOFF_HTTP_TIMEOUT_SECONDS="1")
    try:
        req = await app.submit(channel="CPUB")
        stored = await app.card(req["id"], timeout=20)
        assert len(slack.calls_to("chat.postMessage")) == 1
        assert [c.response.get("error") for c in slack.calls_to("conversations.history", ok_only=False)] == [
            "not_in_channel", "not_in_channel", None]
        cards = [m for m in slack.channel_messages("CPUB")
                 if ((m.metadata or {}).get("event_payload") or {}).get("request_id") == req["id"]]
        assert cards == [stored]
    finally:
        slack.release_hung()
        await app.stop()


async def test_uncertain_post_where_the_bot_may_not_join_gives_up_the_search_and_posts(
    db_url: str, slack: SlackEmulator
) -> None:
    # E.g. an app installed from an older manifest, without channels:join: the search cannot be
    # made, and waiting would not change that, so the card is posted (the documented risk).
    slack.add_channel("CPUB", "public-approvals", bot_member=False)
    slack.error("conversations.join", "missing_scope")
    slack.fail("chat.postMessage", status=500)  # no effect, but the attempt's outcome is unknown
    app = await start_app(db_url, slack, SIGNOFF_HTTP_TIMEOUT_SECONDS="1")
    try:
        req = await app.submit(channel="CPUB")
        await app.card(req["id"], timeout=20)
        assert [c.status for c in slack.calls_to("chat.postMessage")] == [500, 200]
        assert [c.response.get("error") for c in slack.calls_to("conversations.join", ok_only=False)] == [
            "missing_scope"]
    finally:
        await app.stop()


async def test_a_delivery_that_outlasts_its_lease_is_cut_off_before_another_process_could_claim_it(
    db_url: str, slack: SlackEmulator
) -> None:
    # Lease 1.5 s: an attempt must end by 1.35 s. The retry after an unknown outcome looks for the
    # card (0.8 s) and then posts (0.8 s): cut off mid-post, recorded as unknown, and the next
    # attempt looks again. Whatever Slack did with the cut-off post, there is one card.
    slack.fail("chat.postMessage", status=500)
    slack.delay("chat.postMessage", 0.8, times=2)
    slack.delay("conversations.history", 0.8, times=1)
    app = await start_app(db_url, slack, SIGNOFF_OUTBOX_LEASE_SECONDS="1.5", SIGNOFF_HTTP_TIMEOUT_SECONDS="1")
    try:
        req = await app.submit()
        stored = await app.card(req["id"], timeout=20)
        assert cards_for(slack, req["id"]) == [stored]
        assert app.signoff is not None
        [item] = [i for i in await app.signoff.store.outbox_items(req["id"]) if i.kind == "slack.post_card"]
        assert item.status == "done" and item.attempts == 3
        assert len(slack.calls_to("conversations.history", ok_only=False)) == 2  # attempts 2 and 3 looked
    finally:
        await app.stop()


def _error_labels(app: App) -> set[tuple[str, str]]:
    assert app.signoff is not None
    families = app.signoff.metrics.slack_api_errors.collect()
    return {(s.labels["method"], s.labels["status"]) for f in families for s in f.samples
            if s.name.endswith("_total") and s.value > 0}


# -- crashes ---------------------------------------------------------------------


async def _submit(url: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session:
        async with session.post(url + "/api/v1/approvals", json=approval_body(), headers=AUTH) as resp:
            assert resp.status == 201, await resp.text()
            return await resp.json()


async def _get(url: str, request_id: str, wait: float = 0) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{url}/api/v1/approvals/{request_id}?wait={wait}", headers=AUTH) as resp:
            assert resp.status == 200
            return await resp.json()


async def _card_stored(url: str, request_id: str) -> dict[str, Any]:
    async def stored() -> dict[str, Any] | None:
        body = await _get(url, request_id)
        return body if body["card"] else None

    return await until(stored, f"the card of {request_id} to be stored")


@pytest.fixture
def servers(db_url: str, slack: SlackEmulator, tmp_path: Path) -> Any:
    started: list[ServerProcess] = []

    async def start(**env: str) -> ServerProcess:
        server = ServerProcess(db_url, slack, **{**CRASH_ENV, **env})
        await server.start(tmp_path)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.mark.parametrize("slack_posted", [False, True], ids=["before-slack-posted", "after-slack-posted"])
async def test_killed_between_storing_request_and_storing_card(servers: Any, slack: SlackEmulator,
                                                               slack_posted: bool) -> None:
    # Slack receives the post and never answers; when `slack_posted`, it has already posted the message,
    # the narrow window where only a lookup of our earlier message can prevent a duplicate.
    slack.hang("chat.postMessage", apply=slack_posted)
    first = await servers()
    req = await _submit(first.url)
    await slack.wait_for("chat.postMessage", ok_only=False)
    first.kill()
    assert (await _get_direct(first, req["id"])) is None  # really dead
    slack.release_hung()

    second = await servers()
    body = await _card_stored(second.url, req["id"])
    [card] = cards_for(slack, req["id"])
    assert body["card"] == {"channel": "C1", "ts": card.ts}
    ok_posts = [c for c in slack.calls_to("chat.postMessage") if c.status == 200 and not c.hung]
    assert len(ok_posts) == (0 if slack_posted else 1)


async def _get_direct(server: ServerProcess, request_id: str) -> Any:
    try:
        return await _get(server.url, request_id)
    except aiohttp.ClientError:
        return None


async def test_killed_between_storing_click_and_updating_card(servers: Any, slack: SlackEmulator) -> None:
    first = await servers()
    req = await _submit(first.url)
    stored = await _card_stored(first.url, req["id"])
    slack.hang("chat.update", apply=False)
    async with SlackClient(first.url, SIGNING_SECRET, fake=slack) as clicker:
        resp = await clicker.block_action(user="U1", user_name="alice", action_id="signoff_approve",
                                          value=req["id"], block_id="decide", channel="C1",
                                          message_ts=stored["card"]["ts"])
        assert resp.status == 200
    assert (await _get(first.url, req["id"], wait=10))["status"] == "approved"
    await slack.wait_for("chat.update", ok_only=False)
    first.kill()
    slack.release_hung()
    card = slack.messages[("C1", stored["card"]["ts"])]
    assert card.update_count == 0  # the hung update never reached the card

    second = await servers()
    await slack.wait_for("chat.update", count=1, timeout=15)
    assert card.update_count == 1
    assert not any(b["type"] == "actions" for b in card.blocks)
    assert "U1" in str(card.blocks)
    # Exactly once: let the new process sweep its outbox several more times (past the lease).
    await more_sweeps(second.url, "outbox", 5)
    assert card.update_count == 1
    assert (await _get(second.url, req["id"]))["decision"]["decided_by"]["id"] == "U1"


async def test_long_poll_on_one_process_returns_when_another_decides(servers: Any, slack: SlackEmulator) -> None:
    waiter_side, click_side = await servers(), await servers()
    req = await _submit(waiter_side.url)
    stored = await _card_stored(waiter_side.url, req["id"])
    waiting = asyncio.create_task(_get(waiter_side.url, req["id"], wait=30))
    await long_poll_registered(waiter_side.url)  # the long-poll reached the server and registered
    assert not waiting.done()
    async with SlackClient(click_side.url, SIGNING_SECRET, fake=slack) as clicker:
        resp = await clicker.block_action(user="U2", user_name="bob", action_id="signoff_approve",
                                          value=req["id"], block_id="decide", channel="C1",
                                          message_ts=stored["card"]["ts"])
        assert resp.status == 200
    body = await asyncio.wait_for(waiting, 20)
    assert body["status"] == "approved" and body["decision"]["decided_by"]["id"] == "U2"
    # Two dispatchers shared the outbox; still one card and one update.
    assert len(cards_for(slack, req["id"])) == 1
    await slack.wait_for("chat.update")
    assert slack.messages[("C1", stored["card"]["ts"])].update_count == 1


async def test_sigterm_right_after_a_burst_of_acked_clicks_decides_every_one(servers: Any, slack: SlackEmulator,
                                                                              db_url: str) -> None:
    # Acked clicks wait in the backlog while a burst lasts; a graceful stop (a deploy's SIGTERM) runs
    # them before the process exits, so no click that Slack saw acked is dropped.
    server = await servers()
    requests = [await _submit(server.url) for _ in range(30)]
    stored = [await _card_stored(server.url, r["id"]) for r in requests]
    async with SlackClient(server.url, SIGNING_SECRET, fake=slack) as clicker:
        responses = await asyncio.gather(*[
            clicker.block_action(user="U1", user_name="alice", action_id="signoff_approve", value=s["id"],
                                 block_id="decide", channel="C1", message_ts=s["card"]["ts"])
            for s in stored
        ])
    assert all(r.status == 200 for r in responses)
    assert server.proc is not None
    server.proc.terminate()
    # Wait without blocking this loop: the fake Web API the stopping server still calls runs on it.
    assert await asyncio.to_thread(server.proc.wait, 15) == 0
    assert "not yet handled" not in server.log_path.read_text()  # type: ignore[union-attr]

    from storage.stores import open_store

    store = await open_store(db_url)
    try:
        statuses = {(await store.get_request(r["id"])).status.value for r in requests}  # type: ignore[union-attr]
    finally:
        await store.close()
    assert statuses == {"approved"}
