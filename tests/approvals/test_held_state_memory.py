"""What a replica holds in memory for its own requests goes back to its baseline once another replica
decided or delivered them (bench.soak's long-lived replica A grew with every such request).

Two replicas in this process on one database, as the soak runs them as processes: requests submitted
on A, their cards posted and decided on B.
"""

from __future__ import annotations

import asyncio

import pytest

from bot.sandbox import SlackEmulator
from tests.support.app import App, ShiftedClock, approval_body, start_app
from tests.support.waits import waiting_on

N = 12


async def submit_on(app: App, n: int) -> list[str]:
    ids = []
    for i in range(n):
        status, body = await app.api("POST", "/api/v1/approvals", json=approval_body(approvers=["U1"],
                                                                                      summary=f"Held {i}"))
        assert status == 201, body
        ids.append(body["id"])
    return ids


@pytest.mark.postgres_only  # the NOTIFY of B's decision is what tells A; SQLite has none (see the module)
async def test_a_request_decided_by_another_replica_is_no_longer_held_for_a_click(
        db_url: str, slack: SlackEmulator) -> None:
    a = await start_app(db_url, slack)
    b = await start_app(db_url, slack)
    try:
        assert a.signoff is not None
        known = a.signoff.service.known
        baseline = len(known)
        ids = await submit_on(a, N)
        for request_id in ids:
            await a.card(request_id)
        assert len(known) == baseline + N  # held for a click on A
        polls = [asyncio.create_task(a.api("GET", f"/api/v1/approvals/{request_id}?wait=30")) for request_id in ids]
        for request_id in ids:
            await waiting_on(a, request_id)
        for request_id in ids:
            response = await b.click(request_id, "U1")
            assert response.status == 200
        for poll in polls:  # A's long-polls were woken by B's NOTIFY, after A dropped what it held
            status, body = await poll
            assert status == 200 and body["status"] == "approved", body
        assert len(known) == baseline
    finally:
        await a.stop()
        await b.stop()


async def test_requests_whose_cards_another_replica_posted_are_not_held_past_their_age(
        db_url: str, slack: SlackEmulator) -> None:
    clock = ShiftedClock()
    a = await start_app(db_url, slack, clock=clock)
    b = await start_app(db_url, slack, SIGNOFF_OUTBOX_SWEEP_SECONDS="0.1")
    try:
        assert a.signoff is not None
        fresh = a.signoff.service.fresh
        await a.signoff.dispatcher.stop()  # B's dispatcher claims A's card posts first
        baseline = len(fresh)
        ids = await submit_on(a, N)
        for request_id in ids:
            await a.card(request_id)  # posted (by B)
        assert len(fresh) == baseline + N  # A's commits left them for deliveries that never come
        clock.advance(3600)  # far past any delivery of them here (the bound is two outbox leases)
        await submit_on(a, 1)  # its commit puts its post's request, and drops what aged
        assert len(fresh) == baseline + 1
    finally:
        await a.stop()
        await b.stop()
