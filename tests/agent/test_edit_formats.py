"""The edit form checks a field against the tool's `format` (issue 34, item 5): "not an email" for
send_email's `to` is refused on the field in the modal, and nothing is stored or sent."""

from __future__ import annotations

from typing import Any

from bot.sandbox.model import message, text, tool_use
from bot.sandbox.signed import plain_input
from tests.agent.helpers import AgentApp

EMAIL = {"to": "customer@example.com", "subject": "Refund", "body": "Hello,\nyour refund is on its way."}


async def submit_edit(agent: AgentApp, view: dict[str, Any], to: str) -> Any:
    values = {
        "p:to": {"value": plain_input(to)},
        "p:subject": {"value": plain_input(EMAIL["subject"])},
        "p:body": {"value": plain_input(EMAIL["body"])},
        "p:cc": {"value": plain_input(None)},
    }
    return await agent.app.slack_client.view_submission(
        user="U1", user_name="alice", callback_id="signoff_edit", private_metadata=view["private_metadata"],
        values=values)


async def test_an_edit_that_is_not_an_email_is_refused_on_its_field(agent: AgentApp) -> None:
    agent.model.script(
        message(text("I'll email the customer."), tool_use("send_email", EMAIL, id="toolu_email")),
        message(text("Sent.")),
    )
    run = await agent.start("Tell the customer their refund is on its way")
    [call] = await agent.waiting_calls(run["id"])
    await agent.app.click(call["request_id"], "U1", action="signoff_edit", user_name="alice")
    [opened] = await agent.slack.wait_for("views.open")
    view = opened.args["view"]
    for bad in ("not an email", "alice@localhost", "a@@example.com"):  # jsonschema alone lets the last two by
        response = await submit_edit(agent, view, bad)
        assert response.status == 200
        answer = response.json() if response.text not in ("", "{}") else {"accepted": bad}
        assert answer.get("response_action") == "errors", answer
        assert list(answer["errors"]) == ["p:to"] and "email address" in answer["errors"]["p:to"], answer

    status, body = await agent.app.api("GET", f"/api/v1/approvals/{call['request_id']}")
    assert status == 200 and body["status"] == "pending" and body["decision"] is None
    assert agent.emails() == []
    [still] = await agent.waiting_calls(run["id"])
    assert still["final_input"] is None

    response = await submit_edit(agent, view, "someone.else@example.com")  # a real address goes through
    assert response.status == 200 and response.text in ("", "{}"), response.text
    done = await agent.wait_status(run["id"], "completed", "failed")
    assert done["status"] == "completed" and done["tool_calls"][0]["final_input"]["to"] == "someone.else@example.com"
    assert len(agent.emails()) == 1
    # The model is told the field's format too, from the tool's own schema.
    [declared] = [t for t in agent.model.requests[0]["tools"] if t["name"] == "send_email"]
    assert declared["input_schema"]["properties"]["to"]["format"] == "email"
