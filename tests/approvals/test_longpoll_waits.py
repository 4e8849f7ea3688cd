"""A long-poll returns when the request is decided or the wait ends, whatever else changes meanwhile
(issue 9, defect 11): reminders, escalations and snoozes wake waiters but are not answers."""

from __future__ import annotations

import asyncio

from tests.support.outbox import settle
from tests.fakes.clock import FakeClock
from tests.support.app import App
from tests.approvals.timer_steps import tick
from tests.support.waits import waiting_on




async def test_timer_steps_do_not_end_a_long_poll_early(tapp: App, clock: FakeClock) -> None:
    app = tapp
    req = await app.submit(reminders={"every": "10m", "max": 3},
                           escalation={"levels": [{"after": "20m", "notify": ["UMGR"]}]}, timeout="2h")
    await app.card(req["id"])
    await settle(app)
    poll = asyncio.create_task(app.api("GET", f"/api/v1/approvals/{req['id']}?wait=60"))
    await waiting_on(app, req["id"])

    await tick(app, clock, minutes=10)  # reminder 1
    await tick(app, clock, minutes=10)  # escalation to UMGR
    await app.click(req["id"], "U1", action="signoff_snooze", user_name="alice")
    audit = [e.type for e in await app.signoff.store.audit_events(req["id"])]  # type: ignore[union-attr]
    assert "reminded" in audit and "escalated" in audit
    await waiting_on(app, req["id"])  # still waiting after every one of them

    await app.click(req["id"], "U1", user_name="alice")
    status, body = await asyncio.wait_for(poll, 30)
    assert status == 200 and body["status"] == "approved", body  # the decision, not an early "pending"
