"""The MCP tools through the real `mcp` client: over stdio (`signoff mcp`) and over HTTP at /mcp."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, cast

import aiohttp
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from bot.sandbox import SlackEmulator
from bot.sandbox.signed import plain_input
from tests.support.app import API_TOKEN, ROOT, App
from tests.support.process import ServerProcess
from tests.client.claude_cli import signoff_command
from tests.client.helpers import pending_id

Connect = Callable[[App], AbstractAsyncContextManager[ClientSession]]


@asynccontextmanager
async def over_stdio(app: App) -> AsyncIterator[ClientSession]:
    command, *args = signoff_command().split()
    params = StdioServerParameters(command=command, args=[*args, "mcp", "--channel", "C1"], cwd=str(ROOT),
                                   env={"SIGNOFF_URL": app.url, "SIGNOFF_TOKEN": API_TOKEN, "PYTHONPATH": str(ROOT)})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def over_http(app: App, token: str = API_TOKEN) -> AsyncIterator[ClientSession]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=120))
    async with http, streamable_http_client(f"{app.url}/mcp", http_client=http) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result
    if result.structured_content:
        return dict(result.structured_content)
    return json.loads(result.content[0].text)


@pytest.mark.parametrize("connect", [over_stdio, over_http], ids=["stdio", "http"])
async def test_tools_are_listed_and_request_approval_returns_the_edited_decision(app: App, connect: Connect) -> None:
    async with connect(app) as session:
        listed = {t.name: t for t in (await session.list_tools()).tools}
        assert set(listed) == {"request_approval", "ask_human", "permission_prompt"}
        for tool in listed.values():
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint is False and tool.annotations.destructive_hint is False
        calling = asyncio.create_task(session.call_tool("request_approval", {
            "action": "send_email", "params": {"to": "a@example.com", "subject": "Hi"},
            "summary": "Email a@example.com", "channel": "C1",
            "params_schema": {"type": "object", "properties": {"to": {"type": "string"},
                                                               "subject": {"type": "string"}}}}))
        request_id = await pending_id(app)
        await app.click(request_id, "U1", action="signoff_edit", user_name="alice")
        [opened] = await app.slack.wait_for("views.open")
        await app.slack_client.view_submission(user="U1", user_name="alice", callback_id="signoff_edit",
                                               private_metadata=opened.args["view"]["private_metadata"],
                                               values={"p:subject": {"value": plain_input("Hello")}})
        decision = structured(await calling)
    assert decision["approved"] is True and decision["request_id"] == request_id
    assert decision["params"] == {"to": "a@example.com", "subject": "Hello"}
    assert decision["decided_by"] == {"id": "U1", "name": "alice"}


@pytest.mark.parametrize("connect", [over_stdio, over_http], ids=["stdio", "http"])
async def test_ask_human_returns_the_button_answer(app: App, connect: Connect) -> None:
    async with connect(app) as session:
        calling = asyncio.create_task(session.call_tool("ask_human", {"questions": [
            {"question": "Ship it today?", "options": [{"label": "yes"}, {"label": "no"}]}], "channel": "C1"}))
        request_id = await pending_id(app)
        card = await app.card(request_id)
        buttons = [e for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
        await app.slack_client.block_action(user="U2", user_name="bob", action_id=buttons[0]["action_id"],
                                            value=request_id, block_id="signoff_q0", channel=card.channel,
                                            message_ts=card.ts)
        answered = structured(await calling)
    assert answered["outcome"] == "answered" and answered["answered_by"] == {"id": "U2", "name": "bob"}
    assert answered["answers"] == [{"question": "Ship it today?", "selected": ["yes"], "text": None}]


async def test_http_mcp_needs_the_bearer_token(app: App) -> None:
    status, body = await app.api("POST", "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                 auth=False)
    assert status == 401 and body["error"]["code"] == "unauthorized"
    status, _ = await app.api("POST", "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                              headers={"Authorization": "Bearer not-a-token"}, auth=False)
    assert status == 401


async def test_a_graceful_stop_ends_open_mcp_streams(app: App) -> None:
    """A client's listen stream (Claude Code keeps one open) ends when the server stops; it never holds the stop."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {**app.headers, "Accept": "application/json, text/event-stream", "mcp-method": "subscriptions/listen",
               "mcp-protocol-version": "2026-07-28"}
    body = {"jsonrpc": "2.0", "id": "listen:0", "method": "subscriptions/listen",
            "params": {"_meta": meta, "notifications": {"toolsListChanged": True}}}
    async with app.session.post(f"{app.url}/mcp", json=body, headers=headers) as stream:
        assert stream.status == 200 and stream.headers["Content-Type"].startswith("text/event-stream")
        first = await stream.content.readuntil(b"\r\n\r\n")
        assert b"notifications/subscriptions/acknowledged" in first
        assert app.runner is not None
        stopping = asyncio.create_task(app.runner.cleanup())
        with contextlib.suppress(aiohttp.ClientPayloadError):  # cut mid-stream, as a stop does
            await asyncio.wait_for(stream.content.read(), 30)  # a hang guard: it ends at once
        await asyncio.wait_for(stopping, 30)
        app.runner = None


async def test_the_first_request_of_a_fresh_server_can_be_an_mcp_call(db_url: str, slack: SlackEmulator,
                                                                       tmp_path: Path) -> None:
    """`signoff serve` imports the MCP SDK only once it listens (bot/api/mcp_http.py): an MCP call that
    comes before the import has finished waits for it, then is answered like any other."""
    server = ServerProcess(db_url, slack)
    await server.start(tmp_path)  # returns as soon as /healthz answers
    try:
        async with over_http(cast(App, server)) as session:  # over_http needs only `url`
            listed = {t.name for t in (await session.list_tools()).tools}
        assert listed == {"request_approval", "ask_human", "permission_prompt"}
    finally:
        server.stop()
    assert server.log_path is not None
    assert "MCP endpoint could not start" not in server.log_path.read_text()
