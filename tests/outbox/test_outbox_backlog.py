"""The outbox under a backlog: it claims no more items than it can start, and waiting for a turn is
not an attempt. (Found by the chaos test under machine load: the dispatcher claimed whole batches
ahead of its four delivery slots; the items queued in memory until their leases ran out, were put
back with one more attempt each, and were claimed again, so a backlog bounced instead of draining
and the inflated attempt counts pushed the next real retry minutes away.)"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from bot.outbox import effects
from bot.outbox.dispatcher import CONCURRENCY
from bot.sandbox import SlackEmulator
from tests.support.outbox import settle
from tests.fakes.clock import FakeClock
from tests.support.app import App, start_app

from tests.support.waits import more_sweeps

BACKLOG = 3 * CONCURRENCY


@pytest_asyncio.fixture
async def quick(db_url: str, slack: SlackEmulator) -> AsyncIterator[App]:
    running = await start_app(db_url, slack, SIGNOFF_OUTBOX_SWEEP_SECONDS="0.05")
    try:
        yield running
    finally:
        await running.stop()


async def test_a_backlog_is_claimed_only_as_fast_as_the_slots_free_up(quick: App) -> None:
    app, slack = quick, quick.slack
    assert app.signoff is not None
    slack.hang("chat.postMessage", apply=True, times=CONCURRENCY)  # the first posts land, their answers wait
    requests = [await app.submit(summary=f"Refund {n}") for n in range(BACKLOG)]
    await slack.wait_for("chat.postMessage", count=CONCURRENCY, ok_only=False)
    await more_sweeps(app.url, "outbox", 3)  # every sweep after the last submit would have claimed the rest

    items = await app.signoff.store.outbox_items()
    claimed = [i for i in items if i.attempts > 0]
    assert len(claimed) == CONCURRENCY, f"{len(claimed)} of {len(items)} items claimed with {CONCURRENCY} slots"
    assert len(slack.calls_to("chat.postMessage", ok_only=False)) == CONCURRENCY

    slack.release_hung()
    for request in requests:
        await app.card(request["id"], timeout=30)
    await settle(app)
    posts = [i for i in await app.signoff.store.outbox_items() if i.kind == effects.POST_CARD]
    assert [(i.status, i.attempts) for i in posts] == [("done", 1)] * BACKLOG  # each posted on its first claim
    assert len(slack.calls_to("chat.postMessage")) == BACKLOG


async def test_a_card_that_waits_for_the_channels_pace_is_posted_on_its_first_attempt(
        db_url: str, slack: SlackEmulator) -> None:
    clock = FakeClock()  # stands still: the pace's next slot comes only when the test moves time
    app = await start_app(db_url, slack, clock=clock, SIGNOFF_SLACK_CHANNEL_PACE_SECONDS="1")
    try:
        assert app.signoff is not None
        requests = [await app.submit(summary=f"Refund {n}") for n in range(3)]
        await settle(app)
        for _ in range(2):  # the other two wait their turn, one more slot at a time
            await more_sweeps(app.url, "outbox", 2)  # and are claimed, paced and put back meanwhile
            clock.advance(seconds=1)
            await settle(app)
        for request in requests:
            await app.card(request["id"])
        posts = [i for i in await app.signoff.store.outbox_items() if i.kind == effects.POST_CARD]
        # Waiting for the pace did nothing: no attempt used up, no failure counted, nothing uncertain
        # (an uncertain post would search the channel's history before posting).
        assert [(i.status, i.attempts, i.failures) for i in posts] == [("done", 1, 0)] * 3
        assert slack.calls_to("conversations.history", ok_only=False) == []
        assert [c.status for c in slack.calls_to("chat.postMessage", ok_only=False)] == [200] * 3
    finally:
        await app.stop()
