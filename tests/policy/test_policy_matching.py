"""Deny rules fail closed over HTTP (issue 33, item 4): a value the rule cannot judge (another type,
a number in another format, a path with two readings, another spelling) is denied by a deny rule
and never allowed by an allow rule. Each case below came back ALLOWED before the fix."""

from __future__ import annotations

from functools import partial

import pytest

from tests.support.app import App
from tests.support.app import submit_tool

POLICY = """\
rules:
  - name: no-prod-deploys
    tool: deploy
    params: {env: prod}
    effect: deny
  - name: deploys-are-fine
    tool: deploy
    effect: allow
    tier: low
  - name: no-big-refunds
    tool: refund
    params: {amount: {gt: 1000}}
    effect: deny
    reason: big refunds go through finance
  - name: small-refunds
    tool: refund
    params: {amount: {le: 100}}
    effect: allow
    tier: low
  - name: refunds-and-tips-are-high
    tool: [refund, tip]
    tier: high
  - name: small-tips
    tool: tip
    params: {amount: {le: 100}}
    effect: allow
    tier: low
  - name: no-admin-users
    tool: create_user
    params: {user.role: admin}
    effect: deny
  - name: users-are-fine
    tool: create_user
    effect: allow
    tier: low
"""


pytestmark = pytest.mark.policy(POLICY)


submit = partial(submit_tool, risk="low")


async def test_a_list_where_the_rule_expects_a_string_is_denied(papp: App) -> None:
    created = await submit(papp, "deploy", {"env": ["staging", "prod"]})
    assert created["status"] == "rejected" and created["decision"]["rule"] == "no-prod-deploys", created["policy"]
    assert "could not be judged" in created["policy"]["reason"] and "list" in created["policy"]["reason"]
    assert (await submit(papp, "deploy", {"env": ["staging", "dev"]}))["status"] == "approved"


@pytest.mark.parametrize("amount", ["5,000", "5 000", "$5000", "5e3", "\uff15\uff10\uff10\uff10", "5000.00 USD"])
async def test_a_number_in_another_format_is_denied_by_a_comparison(papp: App, amount: str) -> None:
    created = await submit(papp, "refund", {"amount": amount})
    assert created["status"] == "rejected" and created["decision"]["rule"] == "no-big-refunds", created["policy"]
    reason = created["policy"]["reason"]
    assert "could not be judged against gt 1000" in reason and "counts as matching" in reason
    assert "big refunds go through finance" in reason


async def test_a_number_in_another_format_is_never_allowed_by_a_comparison(papp: App) -> None:
    # "5.000" reads as 5 or (with a thousands dot) as 5000: the deny counts it, the allow does not.
    assert (await submit(papp, "refund", {"amount": "5.000"}))["status"] == "rejected"
    assert (await submit(papp, "refund", {"amount": "50"}))["status"] == "approved"  # plain text is a number
    assert (await submit(papp, "refund", {"amount": "\uff15\uff10"}))["status"] == "rejected"  # full-width 50
    # Where no deny applies, the allow does not count what it cannot judge: the tier (high) asks.
    assert (await submit(papp, "tip", {"amount": 50}))["status"] == "approved"
    for amount in ("\uff15\uff10", "5.000", "5e1", [50], {"value": 50}, True, "50 ", "+50"):
        created = await submit(papp, "tip", {"amount": amount})
        assert created["status"] == ("approved" if amount in ("50 ", "+50") else "pending"), (amount, created["policy"])


async def test_a_dotted_key_that_shadows_the_nested_path_is_denied(papp: App) -> None:
    created = await submit(papp, "create_user", {"user.role": "viewer", "user": {"role": "admin"}})
    assert created["status"] == "rejected" and created["decision"]["rule"] == "no-admin-users", created["policy"]
    assert "more than one value" in created["policy"]["reason"]
    assert (await submit(papp, "create_user", {"user.role": "admin"}))["status"] == "rejected"
    assert (await submit(papp, "create_user", {"user": {"role": "viewer"}}))["status"] == "approved"


async def test_another_spelling_of_the_key_or_the_value_is_denied(papp: App) -> None:
    for params in ({"ENV": "prod"}, {"env": "PROD"}, {"\uff45\uff4e\uff56": "prod"}, {"env": "pr\u200bod"}):
        created = await submit(papp, "deploy", params)
        assert created["status"] == "rejected", (params, created["policy"])
