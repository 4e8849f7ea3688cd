"""A tier's quorum, self-approval rule and typed confirmation reach the request, and only tighten:
neither the API body nor the tier can loosen what the other asks for."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from bot.sandbox import SlackEmulator
from tests.support.app import App, approval_body, policy_app

POLICY = """\
tiers:
  high:
    approvers: [U1, U2, U3]
    quorum: 2
    requester_may_approve: false
  critical:
    approvers: [U1, U2]
    confirm: "{params.bucket}"
rules:
  - name: payments-are-high
    tool: pay
    tier: high
  - name: buckets-are-critical
    tool: delete_bucket
    tier: critical
"""


@pytest_asyncio.fixture
async def papp(db_url: str, slack: SlackEmulator, tmp_path: Path) -> AsyncIterator[App]:
    async with policy_app(db_url, slack, tmp_path, POLICY) as running:
        yield running


async def submit(app: App, name: str, params: dict[str, object], **overrides: object) -> dict[str, object]:
    status, body = await app.api("POST", "/api/v1/approvals", json=approval_body(
        action={"name": name, "params": params}, preview=None, approvers=[], **overrides))
    assert status == 201, body
    return body


async def test_the_tier_sets_quorum_and_forbids_self_approval(papp: App) -> None:
    made = await submit(papp, "pay", {"amount": 5}, requested_by="U1")
    assert made["status"] == "pending" and made["quorum"] == 2
    assert made["requester_user"] == "U1" and made["requester_may_approve"] is False


async def test_the_body_cannot_loosen_the_tier_but_may_tighten_it(papp: App) -> None:
    looser = await submit(papp, "pay", {"amount": 5}, quorum=1, requester_may_approve=True, requested_by="U2")
    assert looser["quorum"] == 2 and looser["requester_may_approve"] is False
    stricter = await submit(papp, "pay", {"amount": 5}, quorum=3)
    assert stricter["quorum"] == 3


async def test_the_critical_tier_asks_to_type_its_confirmation(papp: App) -> None:
    made = await submit(papp, "delete_bucket", {"bucket": "logs"})
    assert made["risk"] == "critical" and made["confirm"] == "logs"
