"""Separation of duties over real HTTP: a requester who is a Slack user cannot approve their own request."""

from __future__ import annotations

import json

from tests.support.outbox import drain, snapshot
from tests.agent.conftest import agent, model  # noqa: F401 - fixtures for the run scenario
from tests.agent.helpers import AgentApp
from tests.approvals.duty_steps import ephemerals_to
from bot.sandbox.model import message, text, tool_use
from bot.sandbox.signed import plain_input
from tests.support.app import App


async def test_requester_cannot_approve_is_told_why_and_nothing_is_written(app: App) -> None:
    req = await app.submit(requested_by="U3", approvers=["U1", "U3"])
    assert req["requester_user"] == "U3" and req["requester_may_approve"] is False
    await app.card(req["id"])
    await drain(app)
    before = await snapshot(app, req["id"])

    await app.click(req["id"], "U3", user_name="carol")
    await app.slack.wait_for("chat.postEphemeral", count=1)
    await app.click(req["id"], "U3", action="signoff_edit", user_name="carol")  # editing approves too
    await app.slack.wait_for("chat.postEphemeral", count=2)
    await drain(app)
    told = ephemerals_to(app, "U3")
    assert len(told) == 2 and all("separation of duties" in t for t in told)
    assert await snapshot(app, req["id"]) == before
    assert app.slack.calls_to("views.open") == []

    # Someone else may approve.
    await app.click(req["id"], "U1", user_name="alice")
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert body["status"] == "approved" and body["decision"]["decided_by"]["id"] == "U1"


async def test_requester_may_still_reject_their_own_request(app: App) -> None:
    req = await app.submit(requested_by="support-agent", requester_user="U3", approvers=["U1", "U3"])
    assert req["requester_user"] == "U3" and req["requested_by"] == "support-agent"
    await app.click(req["id"], "U3", action="signoff_reject", user_name="carol")
    [opened] = await app.slack.wait_for("views.open")
    await app.slack_client.view_submission(
        user="U3", user_name="carol", callback_id="signoff_reject",
        private_metadata=opened.args["view"]["private_metadata"], values={"reason": {"value": plain_input("Oops")}},
    )
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert body["status"] == "rejected" and body["decision"]["decided_by"]["id"] == "U3"


async def test_requester_may_approve_when_the_request_allows_it(app: App) -> None:
    req = await app.submit(requested_by="U3", requester_may_approve=True, approvers=["U1", "U3"])
    assert req["requester_may_approve"] is True
    await app.click(req["id"], "U3", user_name="carol")
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert body["status"] == "approved" and body["decision"]["decided_by"]["id"] == "U3"


async def test_an_edit_form_opened_before_is_refused_inline_for_the_requester(app: App) -> None:
    # The form's submission is checked again: an old modal cannot get round the rule.
    req = await app.submit(requested_by="U3", approvers=["U1", "U3"])
    await app.card(req["id"])
    await drain(app)
    before = await snapshot(app, req["id"])
    meta = json.dumps({"request_id": req["id"], "version": 1})
    response = await app.slack_client.view_submission(
        user="U3", callback_id="signoff_edit", private_metadata=meta,
        values={"p:subject": {"value": plain_input("Changed")}},
    )
    assert response.status == 200 and response.json()["response_action"] == "errors"
    assert "separation of duties" in next(iter(response.json()["errors"].values()))
    await drain(app)
    assert await snapshot(app, req["id"]) == before


async def test_the_person_who_started_a_run_in_slack_cannot_approve_its_cards(agent: AgentApp) -> None:
    email = {"to": "customer@example.com", "subject": "Refund", "body": "Hello"}
    agent.model.script(message(tool_use("send_email", email, id="toolu_email")), message(text("Sent.")))
    response = await agent.app.slack_client.command(user="U2", user_name="bob", text="run email the customer",
                                                     channel="C1")
    assert response.status == 200
    [posted] = await agent.slack.wait_for("chat.postMessage")
    run_id = posted.args["metadata"]["event_payload"]["run_id"]
    [call] = await agent.waiting_calls(run_id)
    _, req = await agent.app.api("GET", f"/api/v1/approvals/{call['request_id']}")
    assert req["requester_user"] == "U2" and req["requester_may_approve"] is False

    await agent.app.click(call["request_id"], "U2", user_name="bob")
    await agent.slack.wait_for("chat.postEphemeral", count=1)
    assert "separation of duties" in ephemerals_to(agent.app, "U2")[-1]
    _, still = await agent.app.api("GET", f"/api/v1/approvals/{call['request_id']}")
    assert still["status"] == "pending" and agent.emails() == []

    await agent.app.click(call["request_id"], "U1", user_name="alice")
    done = await agent.wait_status(run_id, "completed", "failed")
    assert done["status"] == "completed" and len(agent.emails()) == 1
