"""A request's whole timeline driven through the clock, and Approve racing the timeout."""

from __future__ import annotations

import asyncio

from slack_sdk.models.blocks import Block

from bot.domain.params_hash import params_sha256
from tests.support.outbox import settle
from tests.fakes.clock import FakeClock
from tests.support.app import App
from tests.approvals.timer_steps import TIMELINE, context_texts, describe, effects, tick
from tests.support.waits import long_poll_registered


async def test_reminders_escalation_and_timeout_in_order(tapp: App, clock: FakeClock) -> None:
    app, slack = tapp, tapp.slack
    req = await app.submit(**TIMELINE)
    assert req["timing"] == {"reminders": {"every": "10m", "max": 2},
                             "escalation": {"levels": [{"after": "30m", "notify": ["UMGR"], "add_as_approvers": True}],
                                            "loops": 0},
                             "timeout": {"after": "1h", "outcome": "expire"}}
    card = await app.card(req["id"])
    await settle(app)
    start = len(slack.calls)

    await tick(app, clock, minutes=10)
    await tick(app, clock, minutes=10)
    reminders = [c.args for c in effects(slack, start)]
    assert [(r["thread_ts"], r["text"]) for r in reminders] == [
        (card.ts, "⏰ Reminder 1 of 2: <@U1> <@U2>, this request has been waiting 10m for a decision."),
        (card.ts, "⏰ Reminder 2 of 2: <@U1> <@U2>, this request has been waiting 20m for a decision."),
    ]

    mark = len(slack.calls)
    await tick(app, clock, minutes=10)  # 30m: escalation to the manager
    escalation = effects(slack, mark)
    assert [describe(c, card.ts) for c in escalation] == [
        ("chat.getPermalink", "card"),
        ("chat.postMessage", "thread"),
        ("chat.update", "card"),
        ("chat.postMessage", "dm:UMGR"),
    ]
    permalink = escalation[0].response["permalink"]
    assert escalation[1].args["text"] == "⬆️ Escalated to <@UMGR> (level 1 of 1): no decision after 30m."
    assert permalink in escalation[3].args["text"] and "escalated to you (level 1 of 1)" in escalation[3].args["text"]
    assert "Send the refund email to customer@example.com" in escalation[3].args["text"]
    card_now = slack.messages[(card.channel, card.ts)]
    assert "⬆️ Escalated to <@UMGR> (level 1 of 1)" in context_texts(card_now.blocks)
    assert [b["action_id"] for b in card_now.blocks[-1]["elements"]] == [
        "signoff_approve", "signoff_edit", "signoff_reject", "signoff_snooze", "signoff_escalate"]
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}")
    assert body["approvers"] == ["U1", "U2", "UMGR"] and body["timers"]["escalated_to"] == ["UMGR"]

    mark = len(slack.calls)
    await tick(app, clock, minutes=10)
    await tick(app, clock, minutes=10)
    assert effects(slack, mark) == []  # reminders are used up; nothing else is due before the timeout

    poll = asyncio.create_task(app.api("GET", f"/api/v1/approvals/{req['id']}?wait=10"))
    await long_poll_registered(app.url)
    await tick(app, clock, minutes=10)  # 60m: the timeout
    status, final = await poll
    assert status == 200 and final["status"] == "expired"
    assert final["decision"] | {"decided_at": None} == {
        "outcome": "expired", "params": req["action"]["params"], "changes": [],
        "comment": "No decision within 1h; expired by default.", "decided_by": None, "decided_at": None,
        "via": "timeout", "params_sha256": params_sha256(req["action"]["params"]), "votes": [], "items": None,
    }
    assert [describe(c, card.ts) for c in effects(slack, mark)] == [("chat.update", "card")]
    expired_card = slack.messages[(card.channel, card.ts)]
    assert not any(b["type"] == "actions" for b in expired_card.blocks)
    assert "⌛ *Expired*" in expired_card.blocks[-2]["text"]["text"] or any(
        "⌛ *Expired*" in (b.get("text") or {}).get("text", "") for b in expired_card.blocks)
    for block in expired_card.blocks:
        Block.parse(block).to_dict()  # type: ignore[union-attr]

    # A click after the timeout is told so and changes nothing.
    assert app.signoff is not None
    store = app.signoff.store
    before = (await store.get_request(req["id"]), await store.audit_events(req["id"]))
    await app.click(req["id"], "U2", user_name="bob")
    [late] = await slack.wait_for("chat.postEphemeral")
    assert late.args["user"] == "U2" and late.args["text"].startswith("Already expired by timeout")
    await tick(app, clock, minutes=30)
    after = (await store.get_request(req["id"]), await store.audit_events(req["id"]))
    assert after == before

    audit = [(e.type, e.data.get("number") or e.data.get("level") or e.data.get("outcome") or e.data.get("user"))
             for e in after[1]]
    assert audit == [
        ("created", None), ("posted", None),
        ("reminded", 1), ("reminded", 2),
        ("escalated", 1), ("card_updated", None), ("notified", "UMGR"),
        ("decided", "expired"), ("card_updated", None),
    ]


async def test_approve_racing_the_timeout_has_one_winner_and_the_loser_is_told(tapp: App, clock: FakeClock) -> None:
    app, slack = tapp, tapp.slack
    assert app.signoff is not None and app.signoff.timers is not None
    timers = app.signoff.timers
    outcomes = []
    # "sweep": the timeout surely first; "click": the click surely first; numbers: both at once, the
    # click sent after that many seconds, so the race lands on both sides of the guarded write.
    for start in ("sweep", 0.0, 0.002, 0.005, 0.01, 0.02, "click"):
        req = await app.submit(reminders=False, escalation=False, timeout="10m")
        card = await app.card(req["id"])
        await settle(app)
        told = len(slack.calls_to("chat.postEphemeral"))
        updates = len(slack.calls_to("chat.update"))
        clock.advance(minutes=10)

        async def click(delay: float = 0.0) -> None:
            await asyncio.sleep(delay)  # deliberate: the offset under test, so the race lands on both sides
            response = await app.slack_client.block_action(
                user="U1", user_name="alice", action_id="signoff_approve", value=req["id"], block_id="decide",
                channel=card.channel, message_ts=card.ts)
            assert response.status == 200

        if start == "sweep":
            await timers.sweep()
            await click()
        elif start == "click":
            await click()
            await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
            await timers.sweep()
        else:
            await asyncio.gather(click(float(start)), timers.sweep())
        _, final = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
        await settle(app)
        audit = await app.signoff.store.audit_events(req["id"])
        assert [e.type for e in audit].count("decided") == 1
        assert len(slack.calls_to("chat.update")) - updates == 1  # the card shows the one outcome
        if final["status"] == "expired":
            assert final["decision"]["via"] == "timeout"
            [note] = (await slack.wait_for("chat.postEphemeral", count=told + 1))[told:]
            assert note.args["user"] == "U1" and note.args["text"].startswith("Already expired by timeout")
        else:
            assert final["status"] == "approved" and final["decision"]["via"] == "button"
            assert final["decision"]["decided_by"]["id"] == "U1"
            assert len(slack.calls_to("chat.postEphemeral")) == told  # the losing timeout only logs
        outcomes.append(final["status"])
    assert outcomes[0] == "expired" and outcomes[-1] == "approved"
