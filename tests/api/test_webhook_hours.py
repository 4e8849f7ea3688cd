"""Webhooks outlast a receiver's deploy (retries over hours, capped backoff, a maximum age) and can be
sent again on request (issue 9, defect 9)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from tests.support.outbox import drain
from tests.api.test_approvals_api import APPROVALS, Receiver, _item_retry_scheduled, _item_status, check_signed, eventually, webhook_item
from bot.sandbox import SlackEmulator as FakeSlack
from tests.support.app import App, ShiftedClock, start_app


@pytest_asyncio.fixture
async def hooked(db_url: str, slack: FakeSlack) -> AsyncIterator[tuple[App, ShiftedClock]]:
    clock = ShiftedClock()
    running = await start_app(db_url, slack, clock=clock, SIGNOFF_EGRESS_ALLOW="127.0.0.1",  # local receivers
                              SIGNOFF_WEBHOOK_MAX_AGE="8h", SIGNOFF_WEBHOOK_BACKOFF_CAP_SECONDS="1800")
    try:
        yield running, clock
    finally:
        await running.stop()


async def fail_then_advance(app: App, clock: ShiftedClock, request_id: str, receiver: Receiver, attempts: int) -> None:
    for attempt in range(1, attempts + 1):
        await receiver.wait_for(attempt)
        await eventually(lambda: _item_retry_scheduled(app, request_id, attempt), f"retry {attempt} scheduled")
        item = await webhook_item(app, request_id)
        assert item.next_attempt_at is not None
        assert (item.next_attempt_at - clock.now()).total_seconds() <= 1800  # the backoff is capped
        clock.advance(1800)
        await drain(app)


async def test_a_receiver_down_for_hours_still_gets_the_decision_and_it_can_be_redelivered(
    hooked: tuple[App, ShiftedClock],
) -> None:
    app, clock = hooked
    async with Receiver([503] * 12 + [200]) as receiver:
        req = await app.submit(callback_url=receiver.url)
        await app.click(req["id"], "U1", user_name="alice")
        await fail_then_advance(app, clock, req["id"], receiver, 12)  # ~6 hours of a receiver that is down
        await receiver.wait_for(13)
        await eventually(lambda: _item_status(app, req["id"], "done"), "the webhook to be delivered")

        status, body = await app.api("POST", f"{APPROVALS}/{req['id']}/redeliver")
        assert status == 202 and body["delivery"] != f"webhook:{req['id']}:decided"
        await drain(app)
        await receiver.wait_for(14)
    first, again = receiver.deliveries[12], receiver.deliveries[13]
    assert check_signed(*first) == check_signed(*again)  # the same decision...
    assert first[0]["X-Signoff-Delivery"] != again[0]["X-Signoff-Delivery"]  # ...as a new delivery


async def test_gives_up_past_the_maximum_age(hooked: tuple[App, ShiftedClock]) -> None:
    app, clock = hooked
    async with Receiver([503]) as receiver:
        req = await app.submit(callback_url=receiver.url)
        await app.click(req["id"], "U1")
        await fail_then_advance(app, clock, req["id"], receiver, 16)  # 16 x 30 min = 8 h
        await receiver.wait_for(17)
        await eventually(lambda: _item_status(app, req["id"], "dead"), "the webhook to be given up")
    item = await webhook_item(app, req["id"])
    assert "over 8." in (item.last_error or "") and "HTTP 503" in (item.last_error or "")


async def test_redeliver_refuses_what_it_cannot_send(hooked: tuple[App, ShiftedClock]) -> None:
    app, _ = hooked
    pending = await app.submit(callback_url="https://agent.example.invalid/hook")
    status, body = await app.api("POST", f"{APPROVALS}/{pending['id']}/redeliver")
    assert status == 409, body
    no_hook = await app.submit()
    await app.click(no_hook["id"], "U1")
    await eventually(lambda: _decided(app, no_hook["id"]), "the decision")
    status, body = await app.api("POST", f"{APPROVALS}/{no_hook['id']}/redeliver")
    assert status == 400 and body["error"]["details"][0]["field"] == "callback_url"
    status, _ = await app.api("POST", f"{APPROVALS}/apr_00000000000000000000000000/redeliver")
    assert status == 404


async def _decided(app: App, request_id: str) -> bool:
    _, body = await app.api("GET", f"{APPROVALS}/{request_id}")
    return bool(body["status"] != "pending")
