"""`GET /api/v1/approvals?idempotency_key=` finds only the calling token's request (issue 33, item 5).

Keys are stored per token (an agent token's `k` as `<token name>:k`); the lookup scopes the key the
same way, so a token finds its own request by the key it sent and never another token's.
"""

from __future__ import annotations

import pytest

from collections.abc import AsyncIterator
from urllib.parse import quote

import pytest_asyncio

from bot.sandbox import SlackEmulator
from tests.support.app import App, approval_body, start_app

pytestmark = pytest.mark.security

A, B, OPS = "tok-agent-a-1", "tok-agent-b-2", "tok-ops-admin-3"
TOKENS = f"agent-a:{A}:agent,agent-b:{B}:agent,ops:{OPS}:admin"


def as_(token: str, **headers: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **headers}


@pytest_asyncio.fixture
async def scoped(db_url: str, slack: SlackEmulator) -> AsyncIterator[App]:
    running = await start_app(db_url, slack, SIGNOFF_API_TOKENS=TOKENS)
    try:
        yield running
    finally:
        await running.stop()


async def lookup(app: App, token: str, key: str) -> list[str]:
    status, body = await app.api("GET", f"/api/v1/approvals?idempotency_key={quote(key, safe='')}",
                                 headers=as_(token))
    assert status == 200, body
    return [item["id"] for item in body["items"]]


async def test_a_token_finds_its_own_request_by_its_key_and_never_another_tokens(scoped: App) -> None:
    app = scoped
    status, mine = await app.api("POST", "/api/v1/approvals", json=approval_body(),
                                 headers=as_(A, **{"Idempotency-Key": "call-1"}))
    assert status == 201
    assert await lookup(app, A, "call-1") == [mine["id"]]  # its own key, as it sent it
    # Another agent token: neither the key as sent nor its stored form finds it (no params leak).
    assert await lookup(app, B, "call-1") == []
    assert await lookup(app, B, "agent-a:call-1") == []
    assert await lookup(app, A, "agent-a:call-1") == []  # scoped once, by the server: not by the caller
    # An admin token finds its own keys as sent, and an agent token's request by the stored form.
    assert await lookup(app, OPS, "call-1") == []
    assert await lookup(app, OPS, "agent-a:call-1") == [mine["id"]]


async def test_an_agent_token_never_sees_an_admin_request_stored_under_its_key_form(scoped: App) -> None:
    app = scoped
    status, admins = await app.api("POST", "/api/v1/approvals", json=approval_body(),
                                   headers=as_(OPS, **{"Idempotency-Key": "agent-a:call-2"}))
    assert status == 201
    assert await lookup(app, OPS, "agent-a:call-2") == [admins["id"]]
    assert await lookup(app, A, "call-2") == []  # the stored key matches, the owner does not


async def test_a_key_of_the_wrong_length_is_a_400(scoped: App) -> None:
    for key in ("", "k" * 256):
        status, body = await scoped.api("GET", f"/api/v1/approvals?idempotency_key={key}", headers=as_(A))
        assert status == 400 and body["error"]["code"] == "invalid_request", body
        assert "idempotency_key must be 1 to 255 characters" in body["error"]["message"]


async def test_the_longest_key_an_agent_may_send_is_stored_and_found_again(scoped: App) -> None:
    """255 characters is the documented limit: under its token's prefix the key used to overflow the
    stored column (a 500 on PostgreSQL); now it is kept as a digest and found again."""
    app = scoped
    key = "k" * 255
    status, first = await app.api("POST", "/api/v1/approvals", json=approval_body(),
                                  headers=as_(A, **{"Idempotency-Key": key}))
    assert status == 201, first
    status, again = await app.api("POST", "/api/v1/approvals", json=approval_body(),
                                  headers=as_(A, **{"Idempotency-Key": key}))
    assert (status, again["id"]) == (200, first["id"])
    assert await lookup(app, A, key) == [first["id"]]
    assert await lookup(app, B, key) == []
    status, other = await app.api("POST", "/api/v1/approvals", json=approval_body(),
                                  headers=as_(B, **{"Idempotency-Key": key}))
    assert status == 201 and other["id"] != first["id"]
