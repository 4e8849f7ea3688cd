"""A tier's quorum, self-approval rule and typed confirmation reach the request, and only tighten:
neither the API body nor the tier can loosen what the other asks for."""

from __future__ import annotations

from functools import partial

import pytest

from tests.support.app import App
from tests.support.app import submit_tool

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


pytestmark = pytest.mark.policy(POLICY)


submit = partial(submit_tool, approvers=[])  # the approvers come from the policy's tiers


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
