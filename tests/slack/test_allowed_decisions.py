"""`allowed_decisions`: the card offers only what the agent allows, and the handlers refuse anything else.

"Reply instead" (`respond`) records a rejection with `via: reply` and the person's answer as comment.
"""

from __future__ import annotations

import json

from bot.sandbox.signed import plain_input
from tests.support.outbox import drain, snapshot
from tests.support.app import App


TIMER_BUTTONS = ("signoff_snooze", "signoff_escalate")  # for approvers, not decisions


def button_ids(message: object) -> list[str]:
    """The decision buttons on a card, in order."""
    return [e["action_id"] for b in message.blocks if b["type"] == "actions"  # type: ignore[attr-defined]
            for e in b["elements"] if e["action_id"] not in TIMER_BUTTONS]


async def test_the_card_offers_only_the_allowed_decisions_and_a_forged_edit_is_refused(app: App) -> None:
    req = await app.submit(allowed_decisions=["approve", "reject"])
    assert req["allowed_decisions"] == ["approve", "reject"]
    card = await app.card(req["id"])
    assert button_ids(card) == ["signoff_approve", "signoff_reject"]
    await drain(app)
    before = await snapshot(app, req["id"])
    await app.click(req["id"], "U1", action="signoff_edit", user_name="alice")  # an old or forged button
    [note] = await app.slack.wait_for("chat.postEphemeral")
    assert "Edit is not offered for this request" in note.args["text"] and "Approve, Reject" in note.args["text"]
    assert app.slack.calls_to("views.open") == []
    assert await snapshot(app, req["id"]) == before


async def test_reply_instead_records_a_rejection_via_reply_with_the_answer(app: App) -> None:
    req = await app.submit(allowed_decisions=["approve", "respond"])
    card = await app.card(req["id"])
    assert button_ids(card) == ["signoff_approve", "signoff_respond", "signoff_reject"]
    assert "Reply instead" in json.dumps(card.blocks)
    await app.click(req["id"], "U1", action="signoff_respond", user_name="alice")
    [opened] = await app.slack.wait_for("views.open")
    meta = opened.args["view"]["private_metadata"]
    empty = await app.slack_client.view_submission(user="U1", user_name="alice", callback_id="signoff_respond",
                                                   private_metadata=meta, values={"reason": {"value": plain_input("  ")}})
    assert empty.json()["response_action"] == "errors"
    await app.slack_client.view_submission(user="U1", user_name="alice", callback_id="signoff_respond",
                                           private_metadata=meta,
                                           values={"reason": {"value": plain_input("Use the March figures.")}})
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=10")
    assert body["status"] == "rejected"
    assert body["decision"]["via"] == "reply" and body["decision"]["comment"] == "Use the March figures."
    await drain(app)
    final = app.slack.messages[(card.channel, card.ts)]
    assert "Replied instead" in json.dumps(final.blocks) and button_ids(final) == []


async def test_a_person_can_always_reject_even_where_the_agent_left_reject_out(app: App) -> None:
    """Issue 33 item 8: the agent cannot take Reject away; a person's reject is recorded."""
    req = await app.submit(allowed_decisions=["approve", "edit", "respond"])
    assert req["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
    card = await app.card(req["id"])
    assert button_ids(card) == ["signoff_approve", "signoff_edit", "signoff_respond", "signoff_reject"]
    await app.click(req["id"], "U1", action="signoff_respond", user_name="alice")
    [opened] = await app.slack.wait_for("views.open")
    # A reject submitted with the respond modal's metadata (the reject modal's own path) is recorded.
    await app.slack_client.view_submission(
        user="U1", user_name="alice", callback_id="signoff_reject",
        private_metadata=opened.args["view"]["private_metadata"], values={"reason": {"value": plain_input("no")}})
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=10")
    assert body["status"] == "rejected" and body["decision"]["comment"] == "no"


async def test_bad_allowed_decisions_are_a_400_naming_the_field(app: App) -> None:
    from tests.support.app import approval_body

    for bad in (["approve", "approve"], ["ignore"], []):
        status, body = await app.api("POST", "/api/v1/approvals", json=approval_body(allowed_decisions=bad))
        assert status == 400, body
        assert body["error"]["details"][0]["field"].startswith("allowed_decisions")
    batch = approval_body(allowed_decisions=["approve"], items=[{"name": "a", "params": {}}])
    del batch["action"], batch["preview"]
    status, body = await app.api("POST", "/api/v1/approvals", json=batch)
    assert status == 400 and "a batch cannot have it" in body["error"]["message"], body
