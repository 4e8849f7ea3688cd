"""`POST /api/v1/policy/check` over HTTP: policy's verdict per call, with nothing written and no card;
the agent's `risk` only raises the tier; without a policy file every call asks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from bot.sandbox import SlackEmulator
from tests.api.test_policy_api import POLICY
from tests.support.app import App, policy_app


@pytest_asyncio.fixture
async def papp(db_url: str, slack: SlackEmulator, tmp_path: Path) -> AsyncIterator[App]:
    slack.add_usergroup("S1", ["U2", "U3"])
    async with policy_app(db_url, slack, tmp_path, POLICY) as running:
        yield running


async def test_each_call_gets_policys_verdict_and_nothing_is_written(papp: App) -> None:
    status, body = await papp.api("POST", "/api/v1/policy/check", json={"actions": [
        {"name": "read_file", "params": {"path": "/tmp/x"}},
        {"name": "delete_bucket", "params": {"env": "prod"}},
        {"name": "send_email", "params": {"to": "a@example.com"}},
    ]})
    assert status == 200, body
    assert body["policy"] is True
    assert [(i["name"], i["outcome"], i["rule"]) for i in body["items"]] == [
        ("read_file", "allow", "reads-are-fine"), ("delete_bucket", "deny", "never-delete-prod"),
        ("send_email", "ask", None)]
    assert "prod is deleted by people only" in body["items"][1]["reason"]
    _, listed = await papp.api("GET", "/api/v1/approvals")
    assert listed["items"] == [] and papp.slack.calls_to("chat.postMessage") == []


async def test_the_agents_risk_only_raises_the_tier(papp: App) -> None:
    _, body = await papp.api("POST", "/api/v1/policy/check", json={
        "actions": [{"name": "read_file", "params": {}}], "risk": "high"})
    assert body["items"][0]["tier"] == "high"
    _, body = await papp.api("POST", "/api/v1/policy/check", json={
        "actions": [{"name": "delete_bucket", "params": {"env": "prod"}}], "risk": "low"})
    assert body["items"][0]["outcome"] == "deny"


async def test_bad_bodies_and_tokens_are_refused(papp: App) -> None:
    status, body = await papp.api("POST", "/api/v1/policy/check", json={"actions": []})
    assert status == 400 and body["error"]["code"] == "invalid_request", body
    status, body = await papp.api("POST", "/api/v1/policy/check", json={"actions": [{"name": "x"}], "extra": 1})
    assert status == 400, body
    status, _ = await papp.api("POST", "/api/v1/policy/check", json={"actions": [{"name": "x"}]}, auth=False)
    assert status == 401


async def test_without_a_policy_file_every_call_asks(app: App) -> None:
    status, body = await app.api("POST", "/api/v1/policy/check", json={"actions": [{"name": "read_file"}]})
    assert status == 200 and body["policy"] is False
    assert [i["outcome"] for i in body["items"]] == ["ask"]
