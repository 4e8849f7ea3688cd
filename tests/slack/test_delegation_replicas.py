"""The submit gate keeps a copy of the live delegations and verifies its stamp in the submit's own
transaction (in the same statement on PostgreSQL): a delegation started or ended through another
replica is honoured by the very next submit here, and one that runs out needs no stamp at all."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.sandbox import SlackEmulator
from tests.support.app import App, ShiftedClock, approval_body, start_app

APPROVALS = "/api/v1/approvals"


async def submit(app: App, **headers: str) -> tuple[int, dict[str, Any]]:
    status, body = await app.api("POST", APPROVALS, json=approval_body(approvers=["U1"]), headers=headers)
    assert status in (200, 201), body
    return status, body


async def test_delegations_started_and_ended_by_another_replica_count_at_once(db_url: str,
                                                                             slack: SlackEmulator) -> None:
    clock = ShiftedClock()
    here, there = await start_app(db_url, slack, clock=clock), await start_app(db_url, slack)
    try:
        _, first = await submit(here)  # the gate's copy: nobody is away
        assert first["approvers"] == ["U1"] and "delegations" not in first
        away = await there.slack_client.command(user="U1", text="away until 2099-12-24 to <@U3|carol>")
        assert "also go to <@U3>" in away.json()["text"]
        for _ in range(2):  # found stale in the unit and checked again; then from the fresh copy
            _, delegated = await submit(here)
            assert delegated["approvers"] == ["U1", "U3"]
            assert delegated["delegations"] == [{"user": "U1", "delegate": "U3", "until": "2099-12-24T00:00:00Z",
                                                 "added": True}]
        back = await there.slack_client.command(user="U1", text="back")
        assert "Welcome back" in back.json()["text"]
        # An idempotent submit on the stale copy: rolled back, checked again, written once.
        status, after = await submit(here, **{"Idempotency-Key": "after-back"})
        assert status == 201 and after["approvers"] == ["U1"] and "delegations" not in after
        status, again = await submit(here, **{"Idempotency-Key": "after-back"})
        assert status == 200 and again["id"] == after["id"]
        # Running out changes no stamp: the copy's windows are checked against the submit's own clock.
        await there.slack_client.command(user="U1", text="away until 2099-12-24 to <@U3|carol>")
        _, delegated = await submit(here)
        assert delegated["approvers"] == ["U1", "U3"]
        clock.advance((datetime(2099, 12, 25, tzinfo=UTC) - datetime.now(UTC)).total_seconds())
        _, expired = await submit(here)
        assert expired["approvers"] == ["U1"] and "delegations" not in expired
        assert here.signoff is not None
        requests = await here.signoff.store.list_requests(status=None, limit=100)
        assert len(requests) == 6 and len({r.id for r in requests}) == 6  # no stale attempt left a row
    finally:
        await there.stop()
        await here.stop()
