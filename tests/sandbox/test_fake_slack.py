"""The Slack fakes behave like Slack, seen through the real slack_sdk client and verifier."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs

import pytest
import pytest_asyncio
from aiohttp import web
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry import builtin_async_handlers
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from bot.sandbox import SlackEmulator
from bot.sandbox.signed import SlackClient, plain_input, static_select

SECRET = "test-signing-secret"


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def button(label: str, action_id: str = "approve") -> dict[str, Any]:
    return {
        "type": "actions",
        "block_id": "actions",
        "elements": [{"type": "button", "action_id": action_id, "text": {"type": "plain_text", "text": label}}],
    }


def modal(title: str = "Approve?") -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": "reason",
        "title": {"type": "plain_text", "text": title},
        "submit": {"type": "plain_text", "text": "Send"},
        "blocks": [
            {
                "type": "input",
                "block_id": "reason",
                "label": {"type": "plain_text", "text": "Reason"},
                "element": {"type": "plain_text_input", "action_id": "text"},
            }
        ],
    }


@pytest_asyncio.fixture
async def fake() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator() as server:
        server.add_channel("C1", "general")  # like Slack, the emulator knows only the channels it has
        server.add_channel("C2", "random")
        yield server


@pytest.fixture
def client(fake: SlackEmulator) -> AsyncWebClient:
    return AsyncWebClient(token="xoxb-test", base_url=fake.url)


# ---------------------------------------------------------------------- messages


async def test_post_update_and_history_keep_metadata(fake: SlackEmulator, client: AsyncWebClient) -> None:
    metadata = {"event_type": "signoff_request", "event_payload": {"request_id": "r1"}}
    posted = await client.chat_postMessage(channel="C1", text="Deploy?", blocks=[section("Deploy?")], metadata=metadata)
    ts = posted["ts"]
    assert posted["channel"] == "C1" and posted["message"]["metadata"] == metadata

    updated = await client.chat_update(channel="C1", ts=ts, text="Approved", blocks=[section("Approved by <@U1>")])
    assert updated["ts"] == ts and updated["text"] == "Approved"

    msg = fake.messages[("C1", ts)]
    assert msg.update_count == 1 and msg.metadata == metadata
    assert msg.history[0].text == "Deploy?" and msg.blocks[0]["text"]["text"] == "Approved by <@U1>"

    with_meta = await client.conversations_history(channel="C1", include_all_metadata=True)
    assert [m["metadata"] for m in with_meta["messages"]] == [metadata]
    without = await client.conversations_history(channel="C1")
    assert "metadata" not in without["messages"][0]

    history_call = fake.calls_to("conversations.history")[0]
    assert history_call.http_method == "GET" and history_call.args["include_all_metadata"] is True
    assert fake.calls_to("chat.postMessage")[0].token == "xoxb-test"


async def test_update_without_blocks_keeps_them(fake: SlackEmulator, client: AsyncWebClient) -> None:
    ts = (await client.chat_postMessage(channel="C1", text="a", blocks=[section("a")]))["ts"]
    await client.chat_update(channel="C1", ts=ts, text="b")
    assert fake.messages[("C1", ts)].blocks == [section("a")]
    with pytest.raises(SlackApiError) as err:
        await client.chat_update(channel="C1", ts="1.000000", text="x")
    assert err.value.response["error"] == "message_not_found"


async def test_threads_permalinks_and_pagination(fake: SlackEmulator, client: AsyncWebClient) -> None:
    parent = (await client.chat_postMessage(channel="C1", text="parent"))["ts"]
    reply = (await client.chat_postMessage(channel="C1", text="reply", thread_ts=parent))["ts"]
    later = (await client.chat_postMessage(channel="C1", text="later"))["ts"]
    assert parent < reply < later

    replies = await client.conversations_replies(channel="C1", ts=parent)
    assert [m["text"] for m in replies["messages"]] == ["parent", "reply"]
    assert replies["messages"][0]["reply_count"] == 1 and replies["messages"][1]["thread_ts"] == parent

    first = await client.conversations_history(channel="C1", limit=1)
    assert [m["text"] for m in first["messages"]] == ["later"] and first["has_more"] is True
    second = await client.conversations_history(channel="C1", limit=1, cursor=first["response_metadata"]["next_cursor"])
    assert [m["text"] for m in second["messages"]] == ["parent"] and second["has_more"] is False

    link = await client.chat_getPermalink(channel="C1", message_ts=reply)
    assert link["permalink"].startswith(f"https://fake-slack.test/archives/C1/p{reply.replace('.', '')}?thread_ts={parent}")
    assert [m.text for m in fake.channel_messages("C1", thread_ts=parent)] == ["reply"]

    # The index by thread follows updates and deletes.
    await client.chat_update(channel="C1", ts=reply, text="edited reply")
    second_reply = (await client.chat_postMessage(channel="C1", text="again", thread_ts=parent))["ts"]
    assert [m.text for m in fake.channel_messages("C1", thread_ts=parent)] == ["edited reply", "again"]
    await client.chat_delete(channel="C1", ts=reply)
    replies = await client.conversations_replies(channel="C1", ts=parent)
    assert [m["text"] for m in replies["messages"]] == ["parent", "again"]
    assert replies["messages"][0]["reply_count"] == 1 and replies["messages"][0]["latest_reply"] == second_reply
    assert [m.text for m in fake.channel_messages("C1")] == ["parent", "later"]


async def test_dm_ephemeral_and_form_encoded_calls(fake: SlackEmulator, client: AsyncWebClient) -> None:
    dm = await client.chat_postMessage(channel="U1", text="hi")
    assert dm["channel"] == "DU1"
    await client.chat_postEphemeral(channel="C1", user="U1", text="only you", thread_ts="1.0")
    assert fake.ephemerals[0] | {"ts": None} == {
        "channel": "C1", "user": "U1", "text": "only you", "blocks": [], "thread_ts": "1.0", "ts": None,
    }
    # A form body with the token as a field and blocks as a JSON string, as older clients send it.
    tokenless = AsyncWebClient(base_url=fake.url)
    await tokenless.api_call(
        "chat.postMessage",
        data={"token": "xoxb-test", "channel": "C2", "text": "form", "blocks": json.dumps([section("form")])},
    )
    (msg,) = fake.channel_messages("C2")
    assert msg.blocks == [section("form")] and fake.calls[-1].token == "xoxb-test"


async def test_block_check_every_n_parses_only_the_first_n_and_every_nth(fake: SlackEmulator,
                                                                          client: AsyncWebClient) -> None:
    """The benchmarks' knob: with N=3, calls 1-3 and 6 parse every block; calls 4 and 5 only count them."""
    fake.block_check_every = 3
    bad = [section("ok"), button("y" * 80)]
    outcomes = []
    for _ in range(6):
        try:
            await client.chat_postMessage(channel="C1", text="x", blocks=bad)
            outcomes.append("posted")
        except SlackApiError as err:
            outcomes.append(err.response["error"])
    assert outcomes == ["invalid_blocks"] * 3 + ["posted"] * 2 + ["invalid_blocks"]
    with pytest.raises(SlackApiError) as err:  # the array itself is always checked
        await client.chat_postMessage(channel="C1", text="x", blocks=[section(str(i)) for i in range(51)])
    assert err.value.response["error"] == "invalid_blocks"


async def test_invalid_blocks_are_rejected(fake: SlackEmulator, client: AsyncWebClient) -> None:
    with pytest.raises(SlackApiError) as err:
        await client.chat_postMessage(channel="C1", text="x", blocks=[section(str(i)) for i in range(51)])
    assert err.value.response["error"] == "invalid_blocks"

    with pytest.raises(SlackApiError) as err:
        await client.chat_postMessage(channel="C1", text="x", blocks=[section("ok"), button("y" * 80)])
    assert err.value.response["error"] == "invalid_blocks"
    (message,) = err.value.response["response_metadata"]["messages"]
    assert "75" in message and message.endswith("[json-pointer:/blocks/1]")

    with pytest.raises(SlackApiError) as err:
        await client.chat_postMessage(channel="C1", blocks=[{"type": "no_such_block"}], text="x")
    assert err.value.response["error"] == "invalid_blocks"
    with pytest.raises(SlackApiError) as err:
        await client.api_call("chat.postMessage", json={"channel": "C1"})  # the SDK would warn
    assert err.value.response["error"] == "no_text"

    ts = (await client.chat_postMessage(channel="C1", text="ok", blocks=[button("Approve")]))["ts"]
    with pytest.raises(SlackApiError):
        await client.chat_update(channel="C1", ts=ts, text="ok", blocks=[button("y" * 80)])
    assert fake.messages[("C1", ts)].update_count == 0 and len(fake.messages) == 1
    assert [c.ok for c in fake.calls_to("chat.postMessage")] == [False, False, False, False, True]


# ---------------------------------------------------------------------- faults


async def test_rate_limit_is_retried_after_retry_after(
    fake: SlackEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Remove the SDK's random 0-1 s jitter so the test takes exactly the Retry-After time.
    monkeypatch.setattr(builtin_async_handlers, "random", SimpleNamespace(random=lambda: 0.0))
    fake.fail("chat.postMessage", status=429, times=2, retry_after=1)
    client = AsyncWebClient(
        token="xoxb-test", base_url=fake.url, retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=2)]
    )
    await client.chat_postMessage(channel="C1", text="eventually")

    calls = fake.calls_to("chat.postMessage")
    assert [(c.status, c.error) for c in calls] == [(429, "ratelimited"), (429, "ratelimited"), (200, None)]
    assert all(later.at - earlier.at >= 1.0 for earlier, later in zip(calls, calls[1:]))
    assert len(fake.channel_messages("C1")) == 1


async def test_error_and_http_failures_are_consumed_in_order(fake: SlackEmulator, client: AsyncWebClient) -> None:
    fake.error("chat.postMessage", "channel_not_found")
    fake.fail("chat.postMessage", status=503)
    with pytest.raises(SlackApiError) as first:
        await client.chat_postMessage(channel="C1", text="x")
    with pytest.raises(SlackApiError) as second:
        await client.chat_postMessage(channel="C1", text="x")
    assert first.value.response.status_code == 200 and first.value.response["error"] == "channel_not_found"
    assert second.value.response.status_code == 503
    await client.chat_postMessage(channel="C1", text="x")
    assert len(fake.messages) == 1


async def test_hang_with_apply_stores_message_but_never_answers(fake: SlackEmulator, client: AsyncWebClient) -> None:
    fake.hang("chat.postMessage", apply=True)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(client.chat_postMessage(channel="C1", text="lost answer"), timeout=0.1)
    (msg,) = fake.channel_messages("C1")
    assert msg.text == "lost answer"
    (call,) = fake.calls_to("chat.postMessage")
    assert call.hung and not call.ok and call.response["ts"] == msg.ts
    assert fake.calls_to("chat.postMessage", ok_only=True) == []


async def test_hang_without_apply_has_no_effect_until_released(fake: SlackEmulator, client: AsyncWebClient) -> None:
    fake.hang("chat.update")
    ts = (await client.chat_postMessage(channel="C1", text="before"))["ts"]
    pending = asyncio.create_task(client.chat_update(channel="C1", ts=ts, text="after"))
    await fake.wait_for("chat.update", ok_only=False)
    assert fake.messages[("C1", ts)].text == "before"
    fake.release_hung()
    with pytest.raises(SlackApiError) as err:
        await pending
    assert err.value.response["error"] == "fake_released"
    assert fake.messages[("C1", ts)].text == "before"


async def test_delay_and_wait_for(fake: SlackEmulator, client: AsyncWebClient) -> None:
    fake.delay("users.info", 0.05, times=1)
    fake.add_user("U1", "ann")
    pending = asyncio.create_task(client.users_info(user="U1"))
    arrived = await fake.wait_for("users.info", ok_only=False)
    assert arrived[0].status == 0  # received, not answered yet
    (done,) = await fake.wait_for("users.info")
    assert done.status == 200 and (await pending)["user"]["name"] == "ann"

    with pytest.raises(AssertionError, match=r"waiting for 1 ok call\(s\) to chat.update; got 0"):
        await fake.wait_for("chat.update", timeout=0.05)


# ---------------------------------------------------------------------- directory


async def test_directory_lookups(fake: SlackEmulator, client: AsyncWebClient) -> None:
    fake.add_user("U1", "ann", "Ann Lee", tz="Europe/Paris")
    fake.add_usergroup("S1", ["U1", "U2"], handle="approvers")
    fake.add_channel("C1", "deploys", members=["U1", "UBOT"])

    user = (await client.users_info(user="U1"))["user"]
    assert (user["real_name"], user["tz"], user["tz_offset"], user["is_bot"]) == ("Ann Lee", "Europe/Paris", 3600, False)
    assert user["profile"]["display_name"] == "ann"
    assert (await client.usergroups_users_list(usergroup="S1"))["users"] == ["U1", "U2"]
    assert (await client.conversations_members(channel="C1"))["members"] == ["U1", "UBOT"]
    assert (await client.conversations_info(channel="C1"))["channel"]["name"] == "deploys"
    assert (await client.conversations_open(users=["U1"]))["channel"]["id"] == "DU1"
    assert (await client.auth_test())["user_id"] == "UBOT"

    for call, error in [
        (client.users_info(user="U404"), "user_not_found"),
        (client.usergroups_users_list(usergroup="S404"), "no_such_subteam"),
        (AsyncWebClient(token="xoxb-wrong", base_url=fake.url).auth_test(), "invalid_auth"),
        (client.api_call("chat.frobnicate"), "unknown_method"),
    ]:
        with pytest.raises(SlackApiError) as err:
            await call
        assert err.value.response["error"] == error


# ---------------------------------------------------------------------- views


async def test_views_open_update_and_publish(fake: SlackEmulator, client: AsyncWebClient) -> None:
    for kwargs, error in [
        ({"view": modal()}, "invalid_arguments"),  # no trigger_id
        ({"trigger_id": "t0", "view": modal("t" * 30)}, "invalid_arguments"),  # title > 24
        ({"trigger_id": "t0", "view": modal() | {"submit": None}}, "invalid_arguments"),  # input needs submit
    ]:
        with pytest.raises(SlackApiError) as err:
            await client.views_open(**kwargs)
        assert err.value.response["error"] == error
        assert err.value.response["response_metadata"]["messages"] or "trigger_id" not in kwargs

    view = (await client.views_open(trigger_id="t1", view=modal()))["view"]
    assert view["id"] in fake.views and view["state"] == {"values": {}} and view["callback_id"] == "reason"
    with pytest.raises(SlackApiError) as err:
        await client.views_open(trigger_id="t1", view=modal())
    assert err.value.response["error"] == "exchanged_trigger_id"

    updated = (await client.views_update(view_id=view["id"], hash=view["hash"], view=modal("Done")))["view"]
    assert fake.views[view["id"]]["title"]["text"] == "Done" and updated["hash"] != view["hash"]
    with pytest.raises(SlackApiError) as err:
        await client.views_update(view_id=view["id"], hash=view["hash"], view=modal())
    assert err.value.response["error"] == "hash_conflict"
    with pytest.raises(SlackApiError) as err:
        await client.views_update(view_id="V404", view=modal())
    assert err.value.response["error"] == "not_found"

    await client.views_publish(user_id="U1", view={"type": "home", "blocks": [section("Pending: 0")]})
    assert fake.home_views["U1"]["blocks"] == [section("Pending: 0")]


# ---------------------------------------------------------------------- signed requests


@pytest_asyncio.fixture
async def echo_app() -> AsyncIterator[str]:
    """A tiny app that verifies Slack signatures and echoes what it parsed."""
    verifier = SignatureVerifier(SECRET)

    async def handle(request: web.Request) -> web.Response:
        raw = await request.text()
        if not verifier.is_valid_request(raw, dict(request.headers)):
            return web.json_response({"error": "invalid request"}, status=401)
        if request.content_type == "application/json":
            body: Any = json.loads(raw)
        else:
            form = {k: v[0] for k, v in parse_qs(raw).items()}
            body = json.loads(form["payload"]) if "payload" in form else form
        retry = request.headers.get("X-Slack-Retry-Num")
        return web.json_response({"body": body, "retry_num": retry})

    app = web.Application()
    app.router.add_post("/slack/events", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    yield f"http://{host}:{port}"
    await runner.cleanup()


@pytest_asyncio.fixture
async def slack(echo_app: str, fake: SlackEmulator) -> AsyncIterator[SlackClient]:
    async with SlackClient(echo_app, SECRET, fake=fake) as sender:
        yield sender


async def test_signed_requests_verify_and_parse(slack: SlackClient, fake: SlackEmulator, client: AsyncWebClient) -> None:
    ts = (await client.chat_postMessage(channel="C1", text="Deploy?", blocks=[button("Approve")]))["ts"]
    resp = await slack.block_action(user="U1", action_id="approve", value="r1", channel="C1", message_ts=ts)
    assert resp.status == 200
    payload = resp.json()["body"]
    assert payload["type"] == "block_actions" and payload["user"]["id"] == "U1"
    assert payload["container"] == {"type": "message", "message_ts": ts, "channel_id": "C1", "is_ephemeral": False}
    assert payload["message"]["blocks"] == [button("Approve")] and payload["actions"][0]["value"] == "r1"

    submitted = await slack.view_submission(
        user="U1", callback_id="reason", values={"reason": {"text": plain_input("ok")}, "env": {"pick": static_select("prod")}}
    )
    view = submitted.json()["body"]["view"]
    assert view["callback_id"] == "reason" and view["state"]["values"]["reason"]["text"]["value"] == "ok"

    event = await slack.event({"type": "app_mention", "user": "U1", "text": "hi"}, event_id="Ev1", retry_num=1)
    assert event.json()["body"]["event_id"] == "Ev1" and event.json()["retry_num"] == "1"
    command = await slack.command(user="U1", text="deploy prod")
    assert command.json()["body"]["command"] == "/signoff" and command.json()["body"]["text"] == "deploy prod"
    assert (await slack.url_verification("abc")).json()["body"]["challenge"] == "abc"


async def test_bad_or_stale_signatures_are_rejected(slack: SlackClient, echo_app: str) -> None:
    body = json.dumps({"type": "url_verification", "challenge": "c"})
    now = int(time.time())
    assert (await slack.post_raw(body, content_type="application/json")).status == 200
    assert (await slack.post_raw(body, content_type="application/json", signature="v0=" + "0" * 64)).status == 401
    assert (await slack.post_raw(body, content_type="application/json", timestamp=now - 301)).status == 401
    async with SlackClient(echo_app, "wrong-secret") as impostor:
        assert (await impostor.url_verification("c")).status == 401
