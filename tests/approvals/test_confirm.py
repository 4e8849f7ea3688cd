"""Typed confirmation over real HTTP: Approve opens a modal; only the exact string approves."""

from __future__ import annotations

from bot.process.slack_endpoint import OPENS_VIEW
from tests.support.outbox import drain, snapshot
from tests.approvals.duty_steps import card_text
from bot.sandbox.signed import plain_input
from tests.support.app import App


async def _open_confirm(app: App, request_id: str, user: str = "U1") -> dict:
    card = await app.card(request_id)
    [approve] = [e for b in card.blocks if b["type"] == "actions" for e in b["elements"]
                 if e["text"]["text"] == "Approve"]
    # Its own action id, run at once like Edit: views.open needs the click's trigger_id within 3 s,
    # so this click must not wait behind a burst's click backlog or the decision slot.
    assert approve["action_id"] == "signoff_approve_confirm" and approve["action_id"] in OPENS_VIEW
    await app.click(request_id, user, action=approve["action_id"], user_name="alice")
    [opened] = await app.slack.wait_for("views.open")
    return opened.args["view"]


async def test_wrong_text_is_an_inline_error_and_writes_nothing_right_text_approves(app: App) -> None:
    req = await app.submit(confirm="drop prod-db")
    assert req["confirm"] == "drop prod-db"
    assert "Approving asks you to type a confirmation" in await card_text(app, req["id"])
    await drain(app)
    before = await snapshot(app, req["id"])

    view = await _open_confirm(app, req["id"])
    assert view["callback_id"] == "signoff_confirm" and "drop prod-db" in view["blocks"][-1]["label"]["text"]
    await drain(app)
    assert await snapshot(app, req["id"]) == before  # the click itself decided nothing

    for wrong in ("", "drop prod", "DROP PROD-DB"):
        response = await app.slack_client.view_submission(
            user="U1", user_name="alice", callback_id="signoff_confirm", private_metadata=view["private_metadata"],
            values={"confirm": {"typed": plain_input(wrong)}},
        )
        answer = response.json()
        assert response.status == 200 and answer["response_action"] == "errors", wrong
        assert "Type exactly: drop prod-db" in answer["errors"]["confirm"]
    await drain(app)
    assert await snapshot(app, req["id"]) == before

    response = await app.slack_client.view_submission(
        user="U1", user_name="alice", callback_id="signoff_confirm", private_metadata=view["private_metadata"],
        values={"confirm": {"typed": plain_input(" drop prod-db ")}},
    )
    assert response.status == 200 and response.text in ("", "{}")
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert body["status"] == "approved"
    assert body["decision"]["via"] == "modal" and body["decision"]["decided_by"]["id"] == "U1"


async def test_critical_requests_ask_to_type_the_action_name_by_default(app: App) -> None:
    req = await app.submit(risk="critical", action={"name": "delete_bucket", "params": {"bucket": "logs"}})
    assert req["confirm"] == "delete_bucket"
    view = await _open_confirm(app, req["id"])
    response = await app.slack_client.view_submission(
        user="U1", callback_id="signoff_confirm", private_metadata=view["private_metadata"],
        values={"confirm": {"typed": plain_input("logs")}},
    )
    assert response.json()["response_action"] == "errors"
    response = await app.slack_client.view_submission(
        user="U1", callback_id="signoff_confirm", private_metadata=view["private_metadata"],
        values={"confirm": {"typed": plain_input("delete_bucket")}},
    )
    assert response.status == 200 and response.text in ("", "{}")
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert body["status"] == "approved"


async def test_edit_and_approve_asks_for_the_confirmation_too(app: App) -> None:
    req = await app.submit(confirm="SEND")
    await app.click(req["id"], "U1", action="signoff_edit", user_name="alice")
    [opened] = await app.slack.wait_for("views.open")
    view = opened.args["view"]
    assert view["callback_id"] == "signoff_edit" and view["blocks"][-1]["block_id"] == "confirm"
    await drain(app)
    before = await snapshot(app, req["id"])
    values = {"p:to": {"value": plain_input("customer@example.com")},
              "p:subject": {"value": plain_input("Your refund of $45")},
              "p:body": {"value": plain_input("Hello")}}
    response = await app.slack_client.view_submission(
        user="U1", callback_id="signoff_edit", private_metadata=view["private_metadata"],
        values={**values, "confirm": {"typed": plain_input("send")}},
    )
    assert response.json()["response_action"] == "errors" and "confirm" in response.json()["errors"]
    await drain(app)
    assert await snapshot(app, req["id"]) == before
    response = await app.slack_client.view_submission(
        user="U1", callback_id="signoff_edit", private_metadata=view["private_metadata"],
        values={**values, "confirm": {"typed": plain_input("SEND")}},
    )
    assert response.status == 200 and response.text in ("", "{}")
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert body["status"] == "approved" and body["decision"]["params"]["subject"] == "Your refund of $45"
