"""The undo window for a batch's approval and for an approval that makes a grant (policy `undo: 30s`),
through HTTP and signed Slack requests, on a clock the test moves.

A batch's last click (Approve selected, after an item decided on its own) is held like a single request's
Approve: the agent keeps waiting, the card shows the items as clicked with "runs in 30 s · Undo", other
clicks are refused; Undo puts the items that click decided back to pending (earlier ones keep theirs);
when the window ends the agent gets the items as clicked. "Approve & remember" is held too, and its grant
is made only when the window ends: within it no other request is approved by it, and an Undo leaves none.
(`uapp`: tests/approvals/conftest.py.)
"""

from __future__ import annotations

import asyncio

from bot.sandbox import SlackEmulator
from bot.sandbox.signed import plain_input
from tests.approvals.batch_steps import approve_selected, open_item, submit
from tests.approvals.test_batch import submit_batch
from tests.approvals.undo_steps import audit, buttons, card_text, undo_click
from tests.support.waits import until, waiting_on
from tests.approvals.timer_steps import tick
from tests.fakes.clock import FakeClock
from tests.slack.test_grants_flow import MAIL, remember
from tests.support.app import App, submit_tool
from tests.support.outbox import settle


async def outcomes(app: App, request_id: str) -> list[str | None]:
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert body["status"] == "pending" and body.get("decision") is None, body
    return [i["outcome"] for i in body["items"]]


async def test_a_batchs_approval_waits_and_undo_puts_what_it_decided_back_to_pending(
        uapp: tuple[App, FakeClock], slack: SlackEmulator) -> None:
    app, clock = uapp
    req = await submit_batch(app, 3)
    rid = req["id"]
    card = await app.card(rid)
    await settle(app)
    poll = asyncio.create_task(app.api("GET", f"/api/v1/approvals/{rid}?wait=60"))
    await waiting_on(app, rid)

    # Action 1 rejected on its own (stored, the batch still waits), then Approve selected decides the rest.
    view = await open_item(app, rid, 0, "signoff_item_reject")
    await submit(app, view, {"reason": {"value": plain_input("Wrong customer")}})
    for _ in range(500):
        if (await outcomes(app, rid))[0] == "rejected":
            break
        await asyncio.sleep(0.01)  # test-side: the modal's ack comes before its write
    updates = len(slack.calls_to("chat.update"))
    await approve_selected(app, rid, [1, 2])
    await slack.wait_for("chat.update", updates + 1)
    for _ in range(1000):  # the reject's own card update may still be the latest: wait for the held one
        text = card_text(slack, app, card.channel, card.ts)
        if "runs in 30 s" in text:
            break
        await asyncio.sleep(0.01)  # test-side: the outbox delivers the update after the click's ack
    assert "runs in 30 s" in text and buttons(slack, card.channel, card.ts) == ["signoff_undo"], text
    await waiting_on(app, rid)  # approved, not released: the agent still waits
    assert await outcomes(app, rid) == ["rejected", None, None]  # the hold keeps the click's choices apart

    # Another approver's click meanwhile changes nothing.
    told_before = len(slack.calls_to("chat.postEphemeral"))
    await approve_selected(app, rid, [1], user="U2")
    told = (await slack.wait_for("chat.postEphemeral", told_before + 1))[-1]
    assert told.args["user"] == "U2" and "undo window" in told.args["text"], told.args
    assert await outcomes(app, rid) == ["rejected", None, None]

    # Undo: what that click decided is pending again; the item rejected before keeps its outcome.
    await tick(app, clock, seconds=10)
    await undo_click(app, rid, "U1")
    # Not a count of updates: the reject's own update may have come after `updates` was read.
    await until(lambda: "undid their approval" in card_text(slack, app, card.channel, card.ts), "the undone card")
    assert "signoff_batch_approve" in buttons(slack, card.channel, card.ts)
    await tick(app, clock, minutes=5)
    await waiting_on(app, rid)
    assert await outcomes(app, rid) == ["rejected", None, None]
    events = await audit(app, rid)
    assert events.count("approval_held") == 1 and events.count("undone") == 1 and "decided" not in events, events

    # Approved again: the agent hears when the window ends, with the items as clicked.
    await approve_selected(app, rid, [2])
    await until(lambda: "runs in 30 s" in card_text(slack, app, card.channel, card.ts), "the card held again")
    await tick(app, clock, seconds=29)
    await waiting_on(app, rid)
    assert not poll.done()
    await tick(app, clock, seconds=1)
    status, body = await asyncio.wait_for(poll, 30)
    assert status == 200 and body["status"] == "approved", body
    assert [i["outcome"] for i in body["items"]] == ["rejected", "rejected", "approved"], body["items"]
    assert (await audit(app, rid)).count("decided") == 1


async def test_approve_and_remember_makes_its_grant_only_when_the_window_ends(
        uapp: tuple[App, FakeClock], slack: SlackEmulator) -> None:
    app, clock = uapp
    first = await submit_tool(app, "send_email", MAIL)
    await app.card(first["id"])
    await settle(app)
    await remember(app, first["id"], "U1", widen=["to:domain"], scope="everyone", duration="1d")
    [note] = await slack.wait_for("chat.postEphemeral")
    assert "unless you undo it" in note.args["text"] and "is made then" in note.args["text"], note.args
    _, grants = await app.api("GET", "/api/v1/grants")
    assert grants["items"] == []  # held: no grant yet
    second = await submit_tool(app, "send_email", {**MAIL, "to": "bob@example.com"})
    assert second["status"] == "pending"  # within the window, nothing is approved by it

    # Undo: the request waits again and no grant is ever made.
    await undo_click(app, first["id"], "U1")
    await tick(app, clock, minutes=5)
    _, grants = await app.api("GET", "/api/v1/grants")
    assert grants["items"] == []
    _, body = await app.api("GET", f"/api/v1/approvals/{first['id']}")
    assert body["status"] == "pending", body
    events = await audit(app, first["id"])
    assert events.count("undone") == 1 and "decided" not in events, events

    # Remembered again and left alone: the decision and the grant come together when the window ends.
    await remember(app, first["id"], "U1", widen=["to:domain"], scope="everyone", duration="1d")
    await slack.wait_for("chat.postEphemeral", 2)
    await tick(app, clock, seconds=31)
    _, body = await app.api("GET", f"/api/v1/approvals/{first['id']}?wait=10")
    assert body["status"] == "approved", body
    _, grants = await app.api("GET", "/api/v1/grants")
    [grant] = grants["items"]
    assert grant["request_id"] == first["id"] and grant["created_by"] == "U1"
    third = await submit_tool(app, "send_email", {**MAIL, "to": "carol@example.com"})
    assert third["status"] == "approved" and third["decision"]["via"] == "grant", third
