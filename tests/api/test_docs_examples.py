"""The Agent API page's (docs/api.md) request-body and timing examples, sent as written: they work once the ids they name
exist in the workspace and the server has a webhook secret, and otherwise fail the way the README
says (a 400 naming the field), never half-way."""

from __future__ import annotations

import json
from typing import Any

from bot.sandbox import SlackEmulator
from tests.support.app import start_app
from tests.support.docs import fenced, page

API_PAGE = page("docs/api.md")  # moved there from the README


def example(after: str) -> dict[str, Any]:
    """The first ```json block after the line containing `after`."""
    return dict(json.loads(fenced(API_PAGE, "json", after=after)))


def workspace(slack: SlackEmulator) -> None:
    """The ids the README tells the reader to replace with theirs."""
    slack.add_channel("C0123ABCD", "support")
    for uid, name in [("U0123ALICE", "alice"), ("U0123MANAGER", "manager"), ("U0123BOB", "bob")]:
        slack.add_user(uid, name)
    slack.add_usergroup("S0456OPS", ["U0123BOB"], "ops")
    slack.add_usergroup("S0456LEADS", ["U0123MANAGER"], "leads")


async def test_the_full_request_body_with_timing_works_as_written(db_url: str, slack: SlackEmulator) -> None:
    workspace(slack)
    body = {**example("The request body"), **example("Three optional fields of the request body")}
    app = await start_app(db_url, slack)  # the harness sets SIGNOFF_WEBHOOK_SECRET
    try:
        status, created = await app.api("POST", "/api/v1/approvals", json=body)
        assert status == 201, created
        card = await app.card(created["id"])
        assert card.channel == "C0123ABCD"
        assert created["timing"]["escalation"]["levels"][1]["notify"] == ["S0456LEADS"]
    finally:
        await app.stop()


async def test_what_it_needs_is_said_when_missing(db_url: str, slack: SlackEmulator) -> None:
    body = example("The request body")
    app = await start_app(db_url, slack, SIGNOFF_WEBHOOK_SECRET="")
    try:
        status, refused = await app.api("POST", "/api/v1/approvals", json=body)
        assert status == 400 and refused["error"]["details"][0]["field"] == "callback_url"
        without_hook = {k: v for k, v in body.items() if k != "callback_url"}
        status, refused = await app.api("POST", "/api/v1/approvals", json=without_hook)
        assert status == 400 and "S0456OPS" in refused["error"]["message"]  # no such group in this workspace
        _, listed = await app.api("GET", "/api/v1/approvals")
        assert listed["items"] == []  # nothing half-stored
    finally:
        await app.stop()


def test_the_decision_example_is_what_the_api_sends() -> None:
    decision = example("The decision, in responses and webhooks")
    assert set(decision) == {"outcome", "params", "changes", "comment", "decided_by", "decided_at", "via"}
