"""Snooze 1h delays the next reminder (not the timeout); cancelling stops pending reminders."""

from __future__ import annotations

from tests.support.outbox import settle
from tests.fakes.clock import FakeClock
from tests.support.app import App
from tests.approvals.timer_steps import describe, effects, tick


async def test_snooze_delays_the_reminder_not_the_timeout_and_cancel_stops_reminders(
    tapp: App, clock: FakeClock
) -> None:
    app, slack = tapp, tapp.slack
    req = await app.submit(reminders={"every": "10m", "max": 3}, escalation=False, timeout="2h")
    other = await app.submit(summary="Another request", reminders="10m", escalation=False, timeout=False)
    card = await app.card(req["id"])
    other_card = await app.card(other["id"])
    await settle(app)

    clock.advance(minutes=5)
    told = len(slack.calls_to("chat.postEphemeral"))
    await app.click(req["id"], "U1", action="signoff_snooze", user_name="alice")
    [note] = (await slack.wait_for("chat.postEphemeral", count=told + 1))[told:]
    assert note.args["user"] == "U1" and note.args["text"].startswith("💤 Snoozed: the next reminder comes <!date^")
    assert "The timeout is unchanged" in note.args["text"]
    outsider = await app.click(req["id"], "UOUT", action="signoff_snooze", user_name="mallory")
    assert outsider.status == 200
    [refused] = (await slack.wait_for("chat.postEphemeral", count=told + 2))[told + 1:]
    assert "not one of the approvers" in refused.args["text"]

    _, cancelled = await app.api("POST", f"/api/v1/approvals/{other['id']}/cancel", json={"reason": "done"})
    assert cancelled["status"] == "cancelled"
    await settle(app)

    mark = len(slack.calls)
    for _ in range(5):
        await tick(app, clock, minutes=10)  # 15m .. 55m: snoozed until 65m; the other request is cancelled
    assert effects(slack, mark) == []
    await tick(app, clock, minutes=10)  # 65m
    [reminder] = effects(slack, mark)
    assert describe(reminder, card.ts) == ("chat.postMessage", "thread") and "Reminder 1 of 3" in reminder.args["text"]
    assert not any(c.args.get("thread_ts") == other_card.ts for c in slack.calls_to("chat.postMessage"))
    await tick(app, clock, minutes=55)  # 120m: the timeout kept its time
    _, final = await app.api("GET", f"/api/v1/approvals/{req['id']}")
    assert final["status"] == "expired" and final["decision"]["via"] == "timeout"
    audit = [e.type for e in await app.signoff.store.audit_events(req["id"])]  # type: ignore[union-attr]
    assert audit.count("snoozed") == 1 and audit.count("reminded") == 1  # at 120m the timeout wins
