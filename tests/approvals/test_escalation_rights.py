"""A notify-only escalation target cannot hand approval rights to anyone (issue 9, defect 4)."""

from __future__ import annotations


from tests.support.outbox import finished, settle
from tests.fakes.clock import FakeClock
from tests.support.app import App
from tests.approvals.timer_steps import tick
from tests.approvals.test_escalate_by_hand import open_escalate, submit_escalate, target_options

NOTIFY_ONLY = {"levels": [{"after": "10m", "notify": ["U3"], "add_as_approvers": False},
                          {"after": "10m", "notify": ["UMGR"]}]}


async def status_of(app: App, request_id: str) -> str:
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    return str(body["status"])


async def test_notify_only_holder_cannot_name_a_person_and_outsiders_stay_out(tapp: App, clock: FakeClock) -> None:
    app = tapp
    req = await app.submit(approvers=["U1"], reminders=False, timeout="2h", escalation=NOTIFY_ONLY)
    await app.card(req["id"])
    await settle(app)
    await tick(app, clock, minutes=10)  # level 1: U3 is told, not made an approver

    view = await open_escalate(app, req["id"], "U3")
    assert "person" not in target_options(view)
    # A forged submission naming a person anyway is refused in the ack, and changes nothing.
    response = await submit_escalate(app, view, "U3", target="person", person="UOUT")
    assert response.status == 200 and response.json()["response_action"] == "errors"
    assert "not made an approver" in response.json()["errors"]["person"]
    await settle(app)
    await app.click(req["id"], "UOUT", user_name="mallory")
    await finished(app)
    assert await status_of(app, req["id"]) == "pending"
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}")
    assert body["approvers"] == ["U1"]


async def test_hand_back_never_promotes_a_notify_only_holder(tapp: App, clock: FakeClock) -> None:
    app = tapp
    req = await app.submit(approvers=["U1"], reminders=False, timeout="2h", escalation=NOTIFY_ONLY)
    await app.card(req["id"])
    await settle(app)
    await tick(app, clock, minutes=10)  # level 1: U3 notified only
    await tick(app, clock, minutes=10)  # level 2: UMGR, an approver; it came "from" U3
    view = await open_escalate(app, req["id"], "UMGR")
    response = await submit_escalate(app, view, "UMGR", target="back", note="not mine")
    assert response.status == 200
    await finished(app)
    audit = [e.type for e in await app.signoff.store.audit_events(req["id"])]  # type: ignore[union-attr]
    assert "handed_back" in audit
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}")
    assert "U3" not in body["approvers"], body["approvers"]
    await app.click(req["id"], "U3", user_name="carol")
    await finished(app)
    assert await status_of(app, req["id"]) == "pending"
    await app.click(req["id"], "U1", user_name="alice")
    await finished(app)
    assert await status_of(app, req["id"]) == "approved"
