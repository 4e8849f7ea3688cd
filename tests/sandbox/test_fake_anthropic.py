"""Tests for the scripted Anthropic Messages API fake, driven through the real SDK."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import anthropic
import pytest
import pytest_asyncio
from anthropic.types import Message, TextBlock, ToolUseBlock

from bot.sandbox.model import FakeAnthropic, Reply, error, message, text, tool_use

MODEL = "claude-test"
TOOLS: list[dict[str, Any]] = [
    {
        "name": "request_approval",
        "description": "Ask a human to approve an action.",
        "input_schema": {"type": "object", "properties": {"action": {"type": "string"}}, "required": ["action"]},
    },
    {"name": "lookup", "input_schema": {"type": "object", "properties": {}}},
]
USER = {"role": "user", "content": "Deploy the service, please."}

ClientFactory = Callable[..., anthropic.AsyncAnthropic]


@pytest_asyncio.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    """A started fake, stopped after the test."""
    server = FakeAnthropic()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest_asyncio.fixture
async def make_client(fake: FakeAnthropic) -> AsyncIterator[ClientFactory]:
    """Build real ``AsyncAnthropic`` clients pointed at the fake; all are closed afterwards."""
    clients: list[anthropic.AsyncAnthropic] = []

    def factory(max_retries: int = 0) -> anthropic.AsyncAnthropic:
        client = anthropic.AsyncAnthropic(base_url=fake.url, api_key="test", max_retries=max_retries)
        clients.append(client)
        return client

    yield factory
    for client in clients:
        await client.close()


async def _raw_post(fake: FakeAnthropic, body: Any, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    """POST to the fake without the SDK, to exercise what the SDK would never send."""
    default = {"x-api-key": "test", "anthropic-version": "2023-06-01"}
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"{fake.url}/v1/messages", json=body, headers=default if headers is None else headers
        ) as resp:
            return resp.status, await resp.json()


async def test_tool_use_reply_is_parsed_by_sdk(fake: FakeAnthropic, make_client: ClientFactory) -> None:
    fake.script(message(text("Asking."), tool_use("request_approval", {"action": "deploy"}, id="toolu_01")))
    client = make_client()

    resp = await client.messages.create(model=MODEL, max_tokens=256, messages=[USER], tools=TOOLS)

    assert isinstance(resp, Message)
    assert resp.id.startswith("msg_") and resp.role == "assistant" and resp.model == MODEL
    assert resp.stop_reason == "tool_use" and resp.stop_sequence is None
    assert isinstance(resp.content[0], TextBlock) and resp.content[0].text == "Asking."
    block = resp.content[1]
    assert isinstance(block, ToolUseBlock)
    assert (block.id, block.name, block.input) == ("toolu_01", "request_approval", {"action": "deploy"})
    assert resp.usage.input_tokens > 0 and resp.usage.output_tokens > 0
    assert fake.requests[0]["tools"] == TOOLS
    assert fake.rejections == []


async def test_generated_ids_and_default_stop_reason() -> None:
    first, second = tool_use("lookup", {}), tool_use("lookup", {})
    assert first["id"].startswith("toolu_") and first["id"] != second["id"]
    assert message(text("hi")).body["stop_reason"] == "end_turn"
    assert message(first).body["stop_reason"] == "tool_use"
    assert message(text("x"), stop_reason="max_tokens").body["stop_reason"] == "max_tokens"


async def test_follow_up_with_tool_results_is_accepted(fake: FakeAnthropic, make_client: ClientFactory) -> None:
    fake.script(
        message(tool_use("request_approval", {"action": "deploy"}), tool_use("lookup", {})),
        message(text("Deployed.")),
    )
    client = make_client()
    first = await client.messages.create(model=MODEL, max_tokens=256, messages=[USER], tools=TOOLS)
    use_a, use_b = (b for b in first.content if isinstance(b, ToolUseBlock))

    second = await client.messages.create(
        model=MODEL,
        max_tokens=256,
        tools=TOOLS,
        messages=[
            USER,
            {"role": "assistant", "content": first.content},  # SDK models echoed back, as a runner does
            {
                "role": "user",
                "content": [  # results in the opposite order, one error with list content, then text
                    {"type": "tool_result", "tool_use_id": use_b.id, "content": "nothing found"},
                    {
                        "type": "tool_result",
                        "tool_use_id": use_a.id,
                        "is_error": True,
                        "content": [{"type": "text", "text": "denied by @alice"}],
                    },
                    {"type": "text", "text": "Carry on."},
                ],
            },
        ],
    )

    assert [b.text for b in second.content if isinstance(b, TextBlock)] == ["Deployed."]
    assert second.stop_reason == "end_turn"
    assert len(fake.requests) == 2 and fake.rejections == []


async def test_missing_tool_result_is_rejected(fake: FakeAnthropic, make_client: ClientFactory) -> None:
    fake.script(
        message(tool_use("request_approval", {"action": "deploy"}, id="toolu_a"), tool_use("lookup", {}, id="toolu_b"))
    )
    fake.script(message(text("unused")))
    client = make_client(max_retries=2)
    first = await client.messages.create(model=MODEL, max_tokens=256, messages=[USER], tools=TOOLS)

    with pytest.raises(anthropic.BadRequestError) as excinfo:
        await client.messages.create(
            model=MODEL,
            max_tokens=256,
            tools=TOOLS,
            messages=[
                USER,
                {"role": "assistant", "content": first.content},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "ok"}]},
            ],
        )

    err = excinfo.value
    assert err.status_code == 400 and err.type == "invalid_request_error"
    assert err.api_message is not None
    assert "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_b." in err.api_message
    assert len(fake.requests) == 2  # recorded although rejected; 400 is not retried
    assert fake.rejections == [(400, err.api_message)]
    assert fake.pending_replies == 1  # a rejected request does not consume the script


@pytest.mark.parametrize(
    "follow_up",
    [
        pytest.param([{"type": "text", "text": "hello"}], id="no-tool-result"),
        pytest.param(
            [{"type": "text", "text": "first"}, {"type": "tool_result", "tool_use_id": "toolu_a", "content": "x"}],
            id="tool-result-after-text",
        ),
        pytest.param("just a string", id="string-content"),
    ],
)
async def test_tool_result_must_lead_next_message(fake: FakeAnthropic, follow_up: Any) -> None:
    body = {
        "model": MODEL,
        "max_tokens": 10,
        "tools": TOOLS,
        "messages": [
            USER,
            {"role": "assistant", "content": [tool_use("lookup", {}, id="toolu_a")]},
            {"role": "user", "content": follow_up},
        ],
    }
    status, payload = await _raw_post(fake, body)
    assert status == 400
    assert payload["type"] == "error" and payload["error"]["type"] == "invalid_request_error"


async def test_tool_use_as_last_message_is_rejected(fake: FakeAnthropic) -> None:
    body = {
        "model": MODEL,
        "max_tokens": 10,
        "tools": TOOLS,
        "messages": [USER, {"role": "assistant", "content": [tool_use("lookup", {}, id="toolu_z")]}],
    }
    status, payload = await _raw_post(fake, body)
    assert status == 400 and "toolu_z" in payload["error"]["message"]


async def test_unknown_tool_use_id_is_rejected(fake: FakeAnthropic, make_client: ClientFactory) -> None:
    client = make_client()
    with pytest.raises(anthropic.BadRequestError) as excinfo:
        await client.messages.create(
            model=MODEL,
            max_tokens=64,
            tools=TOOLS,
            messages=[
                USER,
                {"role": "assistant", "content": [tool_use("lookup", {}, id="toolu_real")]},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_real", "content": "ok"},
                        {"type": "tool_result", "tool_use_id": "toolu_bogus", "content": "ok"},
                    ],
                },
            ],
        )
    assert "unexpected `tool_use_id` found in `tool_result` blocks: toolu_bogus" in str(excinfo.value.api_message)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        pytest.param({"model": MODEL, "messages": [USER]}, "max_tokens", id="no-max-tokens"),
        pytest.param({"model": MODEL, "max_tokens": "10", "messages": [USER]}, "max_tokens", id="str-max-tokens"),
        pytest.param({"max_tokens": 10, "messages": [USER]}, "model", id="no-model"),
        pytest.param({"model": MODEL, "max_tokens": 10, "messages": []}, "messages", id="empty-messages"),
        pytest.param(
            {"model": MODEL, "max_tokens": 10, "messages": [{"role": "assistant", "content": "hi"}]},
            "first message",
            id="assistant-first",
        ),
        pytest.param({"model": MODEL, "max_tokens": 10, "messages": [USER, USER]}, "alternate", id="user-user"),
        pytest.param(
            {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": 5}]},
            "content",
            id="bad-content",
        ),
        pytest.param({"model": MODEL, "max_tokens": 10, "messages": [USER], "max_token": 5}, "max_token", id="typo"),
        pytest.param(
            {"model": MODEL, "max_tokens": 10, "messages": [USER], "tools": [{"name": "x", "input_schema": {}}]},
            "input_schema",
            id="tool-schema-not-object",
        ),
        pytest.param(
            {
                "model": MODEL,
                "max_tokens": 10,
                "messages": [
                    USER,
                    {"role": "assistant", "content": [tool_use("lookup", {}, id="toolu_a")]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a"}]},
                ],
            },
            "must define tools",
            id="tool-blocks-without-tools",
        ),
    ],
)
async def test_invalid_bodies_are_rejected_and_recorded(fake: FakeAnthropic, body: dict, fragment: str) -> None:
    fake.script(message(text("never sent")))
    status, payload = await _raw_post(fake, body)
    assert status == 400, payload
    assert payload["error"]["type"] == "invalid_request_error"
    assert fragment in payload["error"]["message"]
    assert fake.requests == [body]
    assert fake.rejections == [(400, payload["error"]["message"])]
    assert fake.pending_replies == 1


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({"anthropic-version": "2023-06-01"}, id="no-key"),
        pytest.param({"x-api-key": "test"}, id="no-version"),
    ],
)
async def test_missing_auth_headers_give_401(fake: FakeAnthropic, headers: dict[str, str]) -> None:
    status, payload = await _raw_post(fake, {"model": MODEL, "max_tokens": 10, "messages": [USER]}, headers)
    assert status == 401 and payload["error"]["type"] == "authentication_error"
    assert len(fake.requests) == 1


async def test_rate_limit_then_success_is_retried(fake: FakeAnthropic, make_client: ClientFactory) -> None:
    # retry-after-ms wins over retry-after; retry-after: 0 would be ignored (SDK needs > 0) and ~0.5 s back-off used.
    fake.script(error(429, "rate_limit_error", "slow down", retry_after_ms=1), message(text("finally")))
    client = make_client(max_retries=2)

    started = time.monotonic()
    resp = await client.messages.create(model=MODEL, max_tokens=64, messages=[USER])

    assert time.monotonic() - started < 1.0
    assert isinstance(resp.content[0], TextBlock) and resp.content[0].text == "finally"
    assert len(fake.requests) == 2 and fake.requests[0] == fake.requests[1]
    assert [h["x-stainless-retry-count"] for h in fake.request_headers] == ["0", "1"]
    assert fake.rejections == []  # scripted errors are replies, not rejections


async def test_overloaded_after_retries_exhausted(fake: FakeAnthropic, make_client: ClientFactory) -> None:
    overloaded = error(529, "overloaded_error", "Overloaded", retry_after_ms=1)
    fake.script(overloaded, overloaded, overloaded, message(text("too late")))
    client = make_client(max_retries=2)

    with pytest.raises(anthropic.OverloadedError) as excinfo:
        await client.messages.create(model=MODEL, max_tokens=64, messages=[USER])

    assert isinstance(excinfo.value, anthropic.InternalServerError)
    assert excinfo.value.status_code == 529 and excinfo.value.type == "overloaded_error"
    assert len(fake.requests) == 3 and fake.pending_replies == 1


async def test_retry_after_header_is_sent(fake: FakeAnthropic) -> None:
    fake.script(error(429, "rate_limit_error", "slow down", retry_after=7))
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"{fake.url}/v1/messages",
            json={"model": MODEL, "max_tokens": 10, "messages": [USER]},
            headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
        ) as resp:
            assert resp.status == 429
            assert resp.headers["retry-after"] == "7"
            assert resp.headers["request-id"].startswith("req_")
            assert await resp.json() == {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}


async def test_unscripted_request_fails_loudly_without_retry(fake: FakeAnthropic, make_client: ClientFactory) -> None:
    client = make_client(max_retries=2)
    with pytest.raises(anthropic.InternalServerError) as excinfo:
        await client.messages.create(model=MODEL, max_tokens=64, messages=[USER])
    assert excinfo.value.api_message == "FakeAnthropic: no scripted reply for request #1"
    assert len(fake.requests) == 1  # x-should-retry: false stops the SDK's retry loop
    assert fake.rejections == [(500, "FakeAnthropic: no scripted reply for request #1")]


async def test_scripted_tool_use_must_name_declared_tool(fake: FakeAnthropic, make_client: ClientFactory) -> None:
    fake.script(message(tool_use("launch_missiles", {})))
    client = make_client()
    with pytest.raises(anthropic.InternalServerError) as excinfo:
        await client.messages.create(model=MODEL, max_tokens=64, messages=[USER], tools=TOOLS)
    assert "launch_missiles" in str(excinfo.value.api_message)
    assert "script error" in str(excinfo.value.api_message)


async def test_on_request_computes_replies(fake: FakeAnthropic, make_client: ClientFactory) -> None:
    def sync_reply(body: dict[str, Any]) -> Reply:
        return message(text(f"{len(body['messages'])} message(s)"))

    async def async_reply(body: dict[str, Any]) -> Reply:
        await asyncio.sleep(0)
        return message(text(f"async {body['max_tokens']}"))

    client = make_client()
    fake.script(message(text("scripted first")))
    fake.on_request(sync_reply)

    texts = []
    for _ in range(2):
        resp = await client.messages.create(model=MODEL, max_tokens=64, messages=[USER])
        texts.append(resp.content[0].text)  # type: ignore[union-attr]
    fake.on_request(async_reply)
    resp = await client.messages.create(model=MODEL, max_tokens=99, messages=[USER])
    texts.append(resp.content[0].text)  # type: ignore[union-attr]

    assert texts == ["scripted first", "1 message(s)", "async 99"]
    fake.on_request(None)
    with pytest.raises(anthropic.InternalServerError):
        await client.messages.create(model=MODEL, max_tokens=64, messages=[USER])


async def test_on_request_receives_copy(fake: FakeAnthropic, make_client: ClientFactory) -> None:
    def mutating(body: dict[str, Any]) -> Reply:
        body["messages"].clear()
        return message(text("ok"))

    fake.on_request(mutating)
    await make_client().messages.create(model=MODEL, max_tokens=64, messages=[USER])
    assert fake.requests[0]["messages"] == [USER]


async def test_hold_and_release(fake: FakeAnthropic, make_client: ClientFactory) -> None:
    fake.script(message(text("released")))
    client = make_client()
    fake.hold()

    task = asyncio.create_task(client.messages.create(model=MODEL, max_tokens=64, messages=[USER]))
    requests = await fake.wait_for_requests(1)

    assert requests[0]["messages"] == [USER]
    assert not task.done()  # recorded, but the handler is parked until release()
    fake.release()
    resp = await asyncio.wait_for(task, timeout=5)
    assert resp.content[0].text == "released"  # type: ignore[union-attr]


async def test_wait_for_requests_times_out(fake: FakeAnthropic) -> None:
    with pytest.raises(AssertionError, match="expected 1 request"):
        await fake.wait_for_requests(1, timeout=0.05)
