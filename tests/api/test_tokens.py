"""API tokens have names and scopes; a request belongs to the token that made it (issue 9, defect 12).
Also: runs take an Idempotency-Key, and Settings' repr shows no secret."""

from __future__ import annotations

import pytest

from collections.abc import AsyncIterator

import pytest_asyncio

from bot.process.settings import Settings
from bot.sandbox import SlackEmulator as FakeSlack
from tests.support.app import App, approval_body, start_app

pytestmark = pytest.mark.security

A, B, OPS = "tok-agent-a-1", "tok-agent-b-2", "tok-ops-admin-3"
TOKENS = f"agent-a:{A}:agent,agent-b:{B}:agent,ops:{OPS}:admin"


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest_asyncio.fixture
async def scoped(db_url: str, slack: FakeSlack) -> AsyncIterator[App]:
    # Runs need a model key to be accepted; the model is never reached here (loopback, closed port).
    running = await start_app(db_url, slack, SIGNOFF_API_TOKENS=TOKENS, SIGNOFF_DEFAULT_CHANNEL="C1",
                              ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL="http://127.0.0.1:9")
    try:
        yield running
    finally:
        await running.stop()


async def test_an_agent_token_reaches_only_its_own_requests(scoped: App) -> None:
    app = scoped
    status, mine = await app.api("POST", "/api/v1/approvals", json=approval_body(), headers=as_(A))
    assert status == 201
    path = f"/api/v1/approvals/{mine['id']}"
    for method, suffix in [("GET", ""), ("GET", "?wait=1"), ("POST", "/cancel"), ("POST", "/redeliver")]:
        status, body = await app.api(method, path + suffix, headers=as_(B))
        assert status == 404 and body["error"]["code"] == "not_found", (method, suffix, body)
    status, listed = await app.api("GET", "/api/v1/approvals", headers=as_(B))
    assert status == 200 and listed["items"] == []
    status, listed = await app.api("GET", "/api/v1/approvals", headers=as_(A))
    assert [r["id"] for r in listed["items"]] == [mine["id"]]
    status, seen = await app.api("GET", path, headers=as_(OPS))  # admin sees every token's requests
    assert status == 200 and seen["status"] == "pending"
    status, cancelled = await app.api("POST", path + "/cancel", json={}, headers=as_(A))
    assert status == 200 and cancelled["status"] == "cancelled"


async def test_idempotency_keys_are_per_token(scoped: App) -> None:
    app = scoped
    key = {"Idempotency-Key": "same-key"}
    _, a = await app.api("POST", "/api/v1/approvals", json=approval_body(), headers={**as_(A), **key})
    status, b = await app.api("POST", "/api/v1/approvals", json=approval_body(), headers={**as_(B), **key})
    assert status == 201 and a["id"] != b["id"]


async def test_runs_belong_to_their_token_and_honour_an_idempotency_key(scoped: App) -> None:
    app = scoped
    key = {"Idempotency-Key": "run-once"}
    body = {"task": "tidy the workspace"}
    status, first = await app.api("POST", "/api/v1/runs", json=body, headers={**as_(A), **key})
    assert status == 201
    status, again = await app.api("POST", "/api/v1/runs", json=body, headers={**as_(A), **key})
    assert status == 200 and again["id"] == first["id"]
    status, other = await app.api("POST", "/api/v1/runs", json={"task": "something else"},
                                  headers={**as_(A), **key})
    assert status == 409 and other["error"]["code"] == "idempotency_key_reused"
    status, _ = await app.api("GET", f"/api/v1/runs/{first['id']}", headers=as_(B))
    assert status == 404
    status, _ = await app.api("POST", f"/api/v1/runs/{first['id']}/cancel", headers=as_(B))
    assert status == 404
    status, _ = await app.api("GET", f"/api/v1/runs/{first['id']}", headers=as_(OPS))
    assert status == 200
    assert app.signoff is not None
    await app.signoff.dispatcher.drain()
    roots = [c for c in app.slack.calls_to("chat.postMessage")
             if "run_id" in str(c.args.get("metadata")) and not c.args.get("thread_ts")]
    assert len(roots) == 1  # one run, one root message


def test_settings_repr_shows_no_secret() -> None:
    settings = Settings.from_env({
        "SLACK_BOT_TOKEN": "xoxb-SECRET-1", "SLACK_SIGNING_SECRET": "SECRET-2", "SIGNOFF_API_TOKENS": TOKENS,
        "SIGNOFF_WEBHOOK_SECRET": "SECRET-4", "ANTHROPIC_API_KEY": "SECRET-5",
        "DATABASE_URL": "postgresql://u:SECRET-6@db/x", "SIGNOFF_METRICS_TOKEN": "SECRET-7-metrics",
    }, dotenv=None)
    shown = repr(settings) + str(settings) + repr(settings.api_token_specs)
    assert "SECRET" not in shown and "tok-" not in shown
    assert [(t.name, t.scope) for t in settings.api_token_specs] == [
        ("agent-a", "agent"), ("agent-b", "agent"), ("ops", "admin")]
    plain = Settings.from_env({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s",
                               "SIGNOFF_API_TOKENS": "old-plain-token"}, dotenv=None)
    assert [(t.name, t.scope) for t in plain.api_token_specs] == [("token-1", "admin")]


async def test_metrics_need_a_token_or_an_allowed_address(db_url: str, slack: FakeSlack) -> None:
    # The test client connects from 127.0.0.1: take loopback out of the allowed addresses.
    app = await start_app(db_url, slack, SIGNOFF_METRICS_ALLOW="10.0.0.0/8", SIGNOFF_METRICS_TOKEN="scrape-me-123")
    try:
        status, body = await app.api("GET", "/metrics", auth=False)
        assert status == 403 and "SIGNOFF_METRICS_TOKEN" in body["error"]["message"]
        status, _ = await app.api("GET", "/metrics", auth=False, headers={"Authorization": "Bearer wrong-token"})
        assert status == 403
        status, text = await app.api("GET", "/metrics", auth=False, headers={"Authorization": "Bearer scrape-me-123"})
        assert status == 200 and "signoff_" in text
    finally:
        await app.stop()
