"""The undo window (policy `undo: 30s`), through HTTP and signed Slack clicks, on a clock the test moves.

After Approve the card says "runs in 30 s" with an Undo button; the agent's long-poll keeps waiting until
the window ends; an Undo in the window puts the request back to pending (a note on the card, an audit
row) and nothing reaches the agent; a Reject is immediate. (`uapp`: tests/approvals/conftest.py.)
"""

from __future__ import annotations

import asyncio

from bot.sandbox import SlackEmulator
from bot.sandbox.signed import plain_input
from tests.approvals.timer_steps import tick
from tests.approvals.undo_steps import audit, buttons, card_text, undo_click
from tests.fakes.clock import FakeClock
from tests.support.app import App
from tests.support.outbox import settle
from tests.support.waits import waiting_on


async def test_undo_in_the_window_leaves_the_agent_waiting_and_nothing_runs(
        uapp: tuple[App, FakeClock], slack: SlackEmulator) -> None:
    app, clock = uapp
    req = await app.submit()
    card = await app.card(req["id"])
    await settle(app)
    poll = asyncio.create_task(app.api("GET", f"/api/v1/approvals/{req['id']}?wait=60"))
    await waiting_on(app, req["id"])

    await app.click(req["id"], "U1", user_name="alice")
    await slack.wait_for("chat.update", 1)
    text = card_text(slack, app, card.channel, card.ts)
    assert "runs in 30 s" in text and "<@U1>" in text, text
    assert buttons(slack, card.channel, card.ts) == ["signoff_undo"]
    await waiting_on(app, req["id"])  # the agent still waits: approved, not yet released
    status, body = await app.api("GET", f"/api/v1/approvals/{req['id']}")
    assert body["status"] == "pending" and body.get("decision") is None, body

    # Someone else cannot undo it; the approver can, within the window.
    await undo_click(app, req["id"], "U2")
    await tick(app, clock, seconds=10)
    await undo_click(app, req["id"], "U1")
    await slack.wait_for("chat.update", 2)
    text = card_text(slack, app, card.channel, card.ts)
    assert "undid their approval" in text and "signoff_approve" in buttons(slack, card.channel, card.ts), text
    [told] = await slack.wait_for("chat.postEphemeral", 1)
    assert told.args["user"] == "U2" and "Only <@U1>" in told.args["text"], told.args

    # Long past the window's end: nothing was released, the agent still waits, no decision exists.
    await tick(app, clock, minutes=5)
    await waiting_on(app, req["id"])
    status, body = await app.api("GET", f"/api/v1/approvals/{req['id']}")
    assert body["status"] == "pending" and body.get("decision") is None, body
    events = await audit(app, req["id"])
    assert events.count("approval_held") == 1 and events.count("undone") == 1 and "decided" not in events, events

    # A Reject is immediate: no window.
    await app.click(req["id"], "U2", action="signoff_reject")
    [opened] = await slack.wait_for("views.open")
    await app.slack_client.view_submission(
        user="U2", callback_id="signoff_reject", private_metadata=opened.args["view"]["private_metadata"],
        values={"reason": {"value": plain_input("not now")}})
    status, final = await asyncio.wait_for(poll, 30)
    assert status == 200 and final["status"] == "rejected", final


async def test_the_decision_reaches_the_agent_when_the_window_ends_not_before(
        uapp: tuple[App, FakeClock], slack: SlackEmulator) -> None:
    app, clock = uapp
    req = await app.submit()
    card = await app.card(req["id"])
    await settle(app)
    clicked_at = clock.now()
    poll = asyncio.create_task(app.api("GET", f"/api/v1/approvals/{req['id']}?wait=60"))
    await waiting_on(app, req["id"])
    await app.click(req["id"], "U1", user_name="alice")
    await slack.wait_for("chat.update", 1)

    await tick(app, clock, seconds=29)
    await waiting_on(app, req["id"])  # 1 s before the window ends: still waiting
    assert not poll.done()
    await tick(app, clock, seconds=1)
    status, body = await asyncio.wait_for(poll, 30)
    assert status == 200 and body["status"] == "approved", body
    assert body["decision"]["decided_by"]["id"] == "U1" and body["decision"]["via"] == "button"
    assert body["decision"]["decided_at"].startswith(clicked_at.strftime("%Y-%m-%dT%H:%M:%S")), body
    await slack.wait_for("chat.update", 2)
    assert "signoff_undo" not in buttons(slack, card.channel, card.ts)
    await undo_click(app, req["id"], "U1")  # too late: nothing changes
    [told] = await slack.wait_for("chat.postEphemeral", 1)
    assert "Too late to undo" in told.args["text"], told.args
    await tick(app, clock, minutes=5)
    events = await audit(app, req["id"])
    assert events.count("decided") == 1 and "undone" not in events, events


async def test_an_undo_racing_the_windows_end_has_exactly_one_outcome(uapp: tuple[App, FakeClock]) -> None:
    app, clock = uapp
    assert app.signoff is not None
    service = app.signoff.service
    window = service.undo_window
    from bot.domain.model import Actor

    # The release read the held request, then the Undo won: the release writes nothing.
    first = await app.submit()
    await app.card(first["id"])
    await app.click(first["id"], "U1")
    await app.slack.wait_for("chat.update", 1)
    held = await service.get(first["id"])
    assert held.undo_until is not None
    assert await window.undo(first["id"], Actor("U1")) is None
    clock.advance(seconds=31)
    assert await window.release(first["id"], read=held) is None
    assert (await service.get(first["id"])).is_pending
    assert "decided" not in await audit(app, first["id"])

    # The release won: the Undo finds it decided.
    second = await app.submit()
    await app.card(second["id"])
    await app.click(second["id"], "U1")
    await app.slack.wait_for("chat.update", 3)
    clock.advance(seconds=31)
    results = await asyncio.gather(window.release(second["id"]), window.undo(second["id"], Actor("U1")),
                                   app.signoff.timers.sweep())  # type: ignore[union-attr]
    assert (await service.get(second["id"])).status.value == "approved"
    assert (await audit(app, second["id"])).count("decided") == 1
    assert results[1] is not None and "Too late" in results[1]
