"""Slack refuses for good (bad token, missing scope, a channel the bot is not in): the outbox stops
retrying, logs one ERROR line saying what to do, marks the request (`card` null, `delivery` says why,
in the API, the webhook and /healthz) and wakes the waiting agent at once. Transient failures keep
backing off with one WARNING and one INFO per item, and nothing made meanwhile is lost."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from tests.api.test_approvals_api import Receiver
from bot.sandbox import SlackEmulator
from tests.support.app import App, start_app

OUTBOX = "bot.outbox.dispatcher"


def lines(caplog: pytest.LogCaptureFixture, level: int, request_id: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == OUTBOX and r.levelno == level and request_id in r.getMessage()]


async def logged(caplog: pytest.LogCaptureFixture, level: int, request_id: str) -> list[str]:
    """`lines`, once there is one: the dispatcher reports an outcome after the unit recording it has
    committed, and an agent's read can see that commit first (on PostgreSQL its NOTIFY can arrive
    before the dispatcher's COMMIT returns)."""
    deadline = asyncio.get_running_loop().time() + 10
    while not (found := lines(caplog, level, request_id)) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)  # test-side only: waiting for the observable log line
    return found


async def poll(app: App, request_id: str) -> dict[str, Any]:
    """A long-poll as an agent makes it (60 s): it must come back as soon as Slack refused, well before."""
    try:
        async with asyncio.timeout(30):
            status, body = await app.api("GET", f"/api/v1/approvals/{request_id}?wait=60")
    except TimeoutError:
        raise AssertionError("the long-poll waited for its timeout instead of returning the failure") from None
    assert status == 200, body
    return body


async def healthz(app: App) -> dict[str, Any]:
    async with app.session.get(app.url + "/healthz", headers=app.headers) as resp:  # details: an admin token
        assert resp.status == 200
        return await resp.json()


async def test_token_revoked_mid_run_stops_at_once_and_says_what_to_do(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    app.slack.error("chat.postMessage", "token_revoked")
    req = await app.submit()
    body = await poll(app, req["id"])
    assert body["status"] == "pending" and body["card"] is None
    delivery = body["delivery"]
    assert delivery["status"] == "failed" and delivery["error"] == "token_revoked"
    assert delivery["method"] == "chat.postMessage" and "reinstall the app" in delivery["message"]
    assert len(app.slack.calls_to("chat.postMessage")) == 1  # never retried
    assert await logged(caplog, logging.ERROR, req["id"]) == [
        f"slack.post_card for {req['id']} gave up: Slack refused chat.postMessage: token_revoked; "
        "SLACK_BOT_TOKEN was revoked (the app was uninstalled or the token regenerated): reinstall the app at "
        "https://api.slack.com/apps, set the new SLACK_BOT_TOKEN and restart"
    ]
    assert lines(caplog, logging.WARNING, req["id"]) == []
    health = (await healthz(app))["slack"]
    assert health["state"] == "refused" and health["error"] == "token_revoked"
    assert health["last_undelivered"]["request_id"] == req["id"]


async def test_invalid_auth_mid_run_then_a_good_token_again(app: App, caplog: pytest.LogCaptureFixture) -> None:
    first = await app.submit()
    await app.card(first["id"])
    app.slack.bot_token = "xoxb-rotated-elsewhere"  # every call with our token is now invalid_auth
    req = await app.submit()
    body = await poll(app, req["id"])
    assert body["delivery"]["error"] == "invalid_auth" and "set SLACK_BOT_TOKEN" in body["delivery"]["message"]
    assert (await healthz(app))["slack"]["state"] == "refused"
    app.slack.bot_token = "xoxb-test"
    third = await app.submit()
    await app.card(third["id"])
    assert (await healthz(app))["slack"]["state"] == "ok"
    _, again = await app.api("GET", f"/api/v1/approvals/{req['id']}")
    assert again["delivery"]["status"] == "failed"  # the refused one stays marked (nothing re-posts it)


async def test_not_in_one_channel_while_another_works(db_url: str, slack: SlackEmulator,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    slack.add_channel("GSECRET", "secret-approvals", bot_member=False, private=True)
    app = await start_app(db_url, slack)
    try:
        refused = await app.submit(channel="GSECRET")
        posted = await app.submit(channel="C1")
        body = await poll(app, refused["id"])
        assert body["card"] is None and body["delivery"]["error"] == "not_in_channel"
        assert body["delivery"]["channel"] == "GSECRET"
        assert await logged(caplog, logging.ERROR, refused["id"]) == [
            f"slack.post_card for {refused['id']} gave up: Slack refused chat.postMessage: not_in_channel; "
            "the bot is not in channel GSECRET: invite it there with /invite @signoff"
        ]
        card = await app.card(posted["id"])
        assert card.channel == "C1"
        _, ok = await app.api("GET", f"/api/v1/approvals/{posted['id']}")
        assert ok["delivery"] == {"status": "posted"}
        # A channel error is about that channel, not the token.
        assert (await healthz(app))["slack"]["state"] == "ok"
    finally:
        await app.stop()


async def test_missing_scope_names_the_scope(app: App, caplog: pytest.LogCaptureFixture) -> None:
    # The app was installed without chat:write: Slack answers missing_scope with needed=chat:write.
    app.slack.scopes = {"commands", "users:read", "usergroups:read", "channels:history", "groups:history"}
    req = await app.submit()
    body = await poll(app, req["id"])
    assert body["delivery"]["error"] == "missing_scope" and body["delivery"]["needed_scope"] == "chat:write"
    [line] = await logged(caplog, logging.ERROR, req["id"])
    assert line.endswith("Slack refused chat.postMessage: missing_scope; the bot token lacks the scope "
                         "chat:write: add it under OAuth & Permissions > Bot Token Scopes at "
                         "https://api.slack.com/apps (manifest.yml lists every scope Signoff uses), reinstall "
                         "the app and restart")


async def test_channel_not_found_and_archived_are_not_retried(app: App) -> None:
    app.slack.error("chat.postMessage", "channel_not_found")
    gone = await app.submit(channel="CGONE")
    app.slack.error("chat.postMessage", "is_archived")
    archived = await app.submit()
    for req, error, fix in [(gone, "channel_not_found", "check the channel id"),
                            (archived, "is_archived", "unarchive it")]:
        body = await poll(app, req["id"])
        assert body["delivery"]["error"] == error and fix in body["delivery"]["message"]
    assert len(app.slack.calls_to("chat.postMessage")) == 2


async def test_the_agents_webhook_hears_of_it(db_url: str, slack: SlackEmulator) -> None:
    app = await start_app(db_url, slack, SIGNOFF_EGRESS_ALLOW="127.0.0.1")  # the receiver listens on loopback
    try:
        await _undelivered_webhook(app)
    finally:
        await app.stop()


async def _undelivered_webhook(app: App) -> None:
    async with Receiver([200]) as receiver:
        app.slack.error("chat.postMessage", "not_in_channel")
        req = await app.submit(callback_url=receiver.url)
        await receiver.wait_for(1)
        event = json.loads(receiver.deliveries[0][1])
        assert event["type"] == "approval.undelivered"
        assert event["request"]["id"] == req["id"] and event["request"]["card"] is None
        assert event["request"]["delivery"]["error"] == "not_in_channel"


async def test_transient_failures_warn_once_recover_once_and_lose_nothing(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    app.slack.fail("chat.postMessage", status=503, times=4)  # Slack is down for a while
    made = [await app.submit(), await app.submit()]
    for req in made:
        await app.card(req["id"], timeout=20)  # both delivered once Slack is back
    for req in made:
        [warning] = await logged(caplog, logging.WARNING, req["id"])
        assert warning.startswith(f"slack.post_card for {req['id']} failed, retrying in ")
        assert warning.endswith("chat.postMessage: HTTP 503")
        [info] = await logged(caplog, logging.INFO, req["id"])
        assert info.startswith(f"slack.post_card for {req['id']} delivered after ")
        assert lines(caplog, logging.ERROR, req["id"]) == []
        _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}")
        assert body["delivery"] == {"status": "posted"}
    assert (await healthz(app))["slack"]["state"] == "ok"
