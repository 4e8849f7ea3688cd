"""Issue 33 item 3, through the `mcp` package's client: what the operator put in the `/mcp` URL
(`risk`, `approvers`) is a bar the model's arguments can raise, never lower or replace."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.support.app import API_TOKEN, App
from tests.client.test_mcp import structured


@asynccontextmanager
async def over_http(app: App, query: str) -> AsyncIterator[ClientSession]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {API_TOKEN}"}, timeout=httpx2.Timeout(30, read=120))
    async with http, streamable_http_client(f"{app.url}/mcp?{query}", http_client=http) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            yield session


async def call(session: ClientSession, **arguments: object) -> dict[str, object]:
    """A request_approval call nobody decides: cancelled after a moment, its stored request returned."""
    decision = structured(await session.call_tool("request_approval", {
        "action": "drop_table", "params": {"table": "users"}, "summary": "Drop the users table",
        "timeout_seconds": 0.5, **arguments}))
    assert decision["outcome"] == "cancelled", decision
    return decision


async def test_the_models_arguments_never_lower_the_operators_mcp_url(app: App) -> None:
    async with over_http(app, "channel=C1&approvers=U1,U2&risk=high") as session:
        lowered = await call(session, risk="low", approvers=["U9"])
        raised = await call(session, risk="critical")
    _, low = await app.api("GET", f"/api/v1/approvals/{lowered['request_id']}")
    assert (low["risk"], low["approvers"]) == ("high", ["U1", "U2"])
    _, high = await app.api("GET", f"/api/v1/approvals/{raised['request_id']}")
    assert (high["risk"], high["approvers"]) == ("critical", ["U1", "U2"])
    # Where the operator named no approvers, the model's are used (nobody else was chosen).
    async with over_http(app, "channel=C1") as session:
        named = await call(session, approvers=["U9"])
    _, own = await app.api("GET", f"/api/v1/approvals/{named['request_id']}")
    assert (own["risk"], own["approvers"]) == ("high", ["U9"])


async def test_the_operators_channel_holds_over_the_models(app: App) -> None:
    # Where cards go picks who sees and decides them: the model names a channel only where the
    # operator named none.
    async with over_http(app, "channel=C1&approvers=U1") as session:
        moved = await call(session, channel="CFRIENDLY")
    _, kept = await app.api("GET", f"/api/v1/approvals/{moved['request_id']}")
    assert kept["channel"] == "C1"
    app.slack.add_channel("C2", "elsewhere")
    async with over_http(app, "approvers=U1") as session:
        chosen = await call(session, channel="C2")
    _, own = await app.api("GET", f"/api/v1/approvals/{chosen['request_id']}")
    assert own["channel"] == "C2"
