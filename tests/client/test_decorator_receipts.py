"""@require_approval after the click (issue 37): it reports what ran (or how it failed) to the card and
the audit, and an approval bound to a `state` that changed before the call runs asks again."""

from __future__ import annotations

import asyncio
import json

import pytest

from signoff import SignoffClient, require_approval
from tests.client.helpers import next_pending, pending_id
from tests.support.app import API_TOKEN, App
from tests.support.outbox import settle


async def outcome(app: App, request_id: str) -> dict:
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    return body


async def test_the_decorator_reports_the_run_and_the_card_says_it_ran_with_the_approved_parameters(app: App) -> None:
    @require_approval(summary="Refund {amount}", channel="C1", approvers=["U1"], client=SignoffClient(app.url, API_TOKEN))
    def refund(to: str, amount: int) -> dict:
        return {"refund_id": f"r_{amount}"}

    calling = asyncio.create_task(asyncio.to_thread(refund, "a@example.com", 40))
    request_id = await pending_id(app)
    await app.click(request_id, "U1", user_name="alice")
    assert await calling == {"refund_id": "r_40"}
    body = await outcome(app, request_id)
    assert body["outcome_status"] == "ran" and body["outcome"]["result"] == {"refund_id": "r_40"}
    assert body["outcome"]["params"] == {"to": "a@example.com", "amount": 40} and body["outcome"]["same_params"]
    await settle(app)
    card = await app.card(request_id)
    assert "with the approved parameters" in json.dumps(card.blocks, ensure_ascii=False)
    assert app.signoff is not None
    assert "run_ran" in [e.type for e in await app.signoff.store.audit_events(request_id)]


async def test_a_function_that_raises_is_reported_failed_and_still_raises(app: App) -> None:
    @require_approval(summary="Charge", channel="C1", client=SignoffClient(app.url, API_TOKEN))
    def charge(amount: int) -> None:
        raise RuntimeError("card declined")

    calling = asyncio.create_task(asyncio.to_thread(charge, 5))
    request_id = await pending_id(app)
    await app.click(request_id, "U1", user_name="alice")
    with pytest.raises(RuntimeError, match="card declined"):
        await calling
    body = await outcome(app, request_id)
    assert body["outcome_status"] == "failed" and "RuntimeError: card declined" in body["outcome"]["error"]


async def test_an_approval_on_a_state_that_changed_asks_again_with_the_new_preview(app: App) -> None:
    record = {"version": 1, "email": "old@example.com"}
    ran: list[str] = []

    @require_approval(summary="Update the customer's email", channel="C1", client=SignoffClient(app.url, API_TOKEN),
                      preview=lambda customer, email: {"kind": "markdown",
                                                       "text": f"{record['email']} → {email}"},
                      state=lambda customer, email: f"v{record['version']}")
    def update_email(customer: str, email: str) -> None:
        ran.append(email)

    calling = asyncio.create_task(asyncio.to_thread(update_email, "c_1", "new@example.com"))
    first = await pending_id(app)
    assert (await outcome(app, first))["state"] == "v1"
    record.update(version=2, email="other@example.com")  # someone else changed the row meanwhile
    await app.click(first, "U1", user_name="alice")
    second = await next_pending(app, first)
    again = await outcome(app, second)
    assert again["preview"]["text"] == "other@example.com → new@example.com" and again["state"] == "v2"
    assert f"changed since it was approved ({first})" in again["context"]
    assert ran == []  # nothing ran on the stale approval
    assert (await outcome(app, first))["outcome_status"] == "skipped"
    await app.click(second, "U1", user_name="alice")
    await calling
    assert ran == ["new@example.com"] and (await outcome(app, second))["outcome_status"] == "ran"
