"""The emulator answers bad Web API calls the way Slack does, and the bot reacts to each answer.

Each error is provoked for real (no injected fault): an unknown channel, a private channel the bot is
not in, a scope the app lacks, blocks and text over Slack's limits, posting faster than Slack allows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.sandbox import SlackEmulator
from tests.support.app import ROOT, App

MANIFEST_SCOPES = set(yaml.safe_load(Path(ROOT / "manifest.yml").read_text())["oauth_config"]["scopes"]["bot"])


async def _gave_up(app: App, request_id: str) -> tuple[str, dict[str, Any]]:
    """Drain the outbox; the card delivery's last error and the request as the agent sees it."""
    assert app.signoff is not None
    await app.signoff.dispatcher.drain()
    [item] = [i for i in await app.signoff.store.outbox_items(request_id) if i.kind == "slack.post_card"]
    assert item.status == "dead"
    audit = await app.signoff.store.audit_events(request_id)
    assert audit[-1].type == "post_failed" and audit[-1].data["error"] == item.last_error
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    return item.last_error or "", body


def _client(slack: SlackEmulator) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=slack.url)


async def test_unknown_channel_is_channel_not_found_and_the_bot_gives_up_once(app: App) -> None:
    req = await app.submit(channel="CNOSUCH1")
    error, body = await _gave_up(app, req["id"])
    assert error == "chat.postMessage: channel_not_found"
    [call] = app.slack.calls_to("chat.postMessage")  # a permanent error is not retried
    assert call.status == 200 and call.error == "channel_not_found"
    assert body["status"] == "pending" and body["card"] is None  # the agent can still cancel it


async def test_private_channel_without_the_bot_is_not_in_channel(app: App) -> None:
    app.slack.add_channel("GSECRET", "secret", private=True, bot_member=False)
    req = await app.submit(channel="GSECRET")
    error, _ = await _gave_up(app, req["id"])
    assert error == "chat.postMessage: not_in_channel"
    assert app.slack.channel_messages("GSECRET") == []


async def test_missing_scope_names_the_scope_and_the_bot_gives_up(app: App) -> None:
    app.slack.scopes = MANIFEST_SCOPES - {"chat:write"}
    req = await app.submit()
    error, _ = await _gave_up(app, req["id"])
    assert error == "chat.postMessage: missing_scope"
    [call] = app.slack.calls_to("chat.postMessage")
    assert call.response["needed"] == "chat:write" and "users:read" in call.response["provided"]


async def test_the_manifest_scopes_are_enough_for_a_whole_decision(app: App) -> None:
    app.slack.scopes = set(MANIFEST_SCOPES)
    app.slack.add_channel("CPUB", "public", bot_member=False)  # chat:write.public: no invitation needed
    req = await app.submit(channel="CPUB")
    card = await app.card(req["id"])
    assert (await app.click(req["id"], "U1")).status == 200
    await app.slack.wait_for("chat.update")
    assert "Approved" in card.text or any("Approved" in str(b) for b in card.blocks)
    assert not [c for c in app.slack.calls if c.error == "missing_scope"]


async def test_without_chat_write_public_a_channel_the_bot_is_not_in_is_refused(app: App) -> None:
    app.slack.scopes = MANIFEST_SCOPES - {"chat:write.public"}
    app.slack.add_channel("CPUB", "public", bot_member=False)
    req = await app.submit(channel="CPUB")
    error, _ = await _gave_up(app, req["id"])
    assert error == "chat.postMessage: not_in_channel"


async def test_blocks_over_slacks_limits_are_invalid_blocks_with_the_reason(slack: SlackEmulator) -> None:
    client = _client(slack)
    long_field = {"type": "section", "fields": [{"type": "mrkdwn", "text": "x" * 2001}]}  # slack_sdk skips this
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postMessage(channel="C1", text="t", blocks=[{"type": "divider"}, long_field])
    assert caught.value.response["error"] == "invalid_blocks"
    assert caught.value.response["response_metadata"]["messages"] == [
        "[ERROR] must be less than 2001 characters [json-pointer:/blocks/1/fields/0/text]"]
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postMessage(channel="C1", text="t", blocks=[{"type": "divider"}] * 51)
    assert caught.value.response["error"] == "invalid_blocks"
    assert "no more than 50 items" in caught.value.response["response_metadata"]["messages"][0]
    long_header = {"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}  # slack_sdk checks this
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postMessage(channel="C1", text="t", blocks=[long_header])
    assert "[json-pointer:/blocks/0]" in caught.value.response["response_metadata"]["messages"][0]
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postMessage(channel="C1", text="x" * 40_001)
    assert caught.value.response["error"] == "msg_too_long"
    assert slack.channel_messages("C1") == []


async def test_the_bot_keeps_the_largest_request_within_slacks_limits(app: App) -> None:
    # The API accepts this much from an agent; the card must still be something Slack takes
    # (no invalid_blocks, no msg_too_long): long values are cut, not sent.
    params = {f"field_{i:02d}": "v" * 5000 for i in range(40)}
    req = await app.submit(
        summary="s" * 3000, context="c" * 20000, action={"name": "send_email", "params": params},
        preview={"kind": "email", "to": ["a@example.com"] * 50, "subject": "x" * 2000, "body": "line\n" * 10000},
    )
    card = await app.card(req["id"])
    assert not [c for c in app.slack.calls if c.error]
    assert len(card.blocks) <= 50


async def test_posting_faster_than_one_a_second_per_channel_is_429_and_every_card_still_lands_once(
    app: App,
) -> None:
    app.slack.pace(1.0)
    ids = [(await app.submit())["id"] for _ in range(3)]
    cards = [await app.card(i, timeout=20) for i in ids]
    posts = app.slack.calls_to("chat.postMessage")
    limited = [c for c in posts if c.status == 429]
    assert limited and all(c.error == "ratelimited" for c in limited)
    assert len({c.ts for c in cards}) == 3 and len(app.slack.channel_messages("C1")) == 3
    assert ("chat.postMessage", "429") in _error_labels(app)


def _error_labels(app: App) -> set[tuple[str, str]]:
    assert app.signoff is not None
    families = app.signoff.metrics.slack_api_errors.collect()
    return {(s.labels["method"], s.labels["status"]) for f in families for s in f.samples
            if s.name.endswith("_total") and s.value > 0}


async def test_the_pace_answers_429_with_retry_after_per_channel(slack: SlackEmulator) -> None:
    slack.pace(1.0)
    slack.add_channel("C2", "other")
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {slack.bot_token}"}) as session:
        answers = []
        for channel in ("C1", "C1", "C2"):
            async with session.post(slack.url + "chat.postMessage", json={"channel": channel, "text": "hi"}) as resp:
                answers.append((resp.status, resp.headers.get("Retry-After"), (await resp.json())["ok"]))
    assert answers == [(200, None, True), (429, "1", False), (200, None, True)]
    assert len(slack.channel_messages("C1")) == 1
