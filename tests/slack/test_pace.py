"""Slack's pace (about one chat.postMessage per second per channel): a burst into one channel posts
every card without a 429 storm, and a 429 delays only its own channel."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest_asyncio

from bot.outbox import effects
from bot.sandbox import SlackEmulator as FakeSlack
from bot.slack.pace import FLIGHT, STALE, ChannelPace
from tests.fakes.clock import FakeClock
from tests.support.app import App, ShiftedClock, approval_body, start_app
from tests.support.waits import metric

BURST = 100


def one_second_pace() -> tuple[FakeClock, ChannelPace]:
    """A pace of one post per second per channel, on a clock that moves only when the test moves it."""
    clock = FakeClock()
    return clock, ChannelPace(clock, interval=1.0)


@pytest_asyncio.fixture
async def paced(db_url: str, slack: FakeSlack) -> AsyncIterator[App]:
    # Slack's limit and our pace, scaled down (Slack 20x, our pace ~8x: a margin for the network), so that the burst
    # takes seconds, not minutes. The first cards go out while the 100 submits load the one event loop this shares
    # with the fake: a post may reach it 0.2 s after taking its slot, next to the following one; the pace then
    # keeps half an interval (0.06 s, more than Slack's 0.05) after each answer (ChannelPace.sent).
    slack.pace(0.05)
    running = await start_app(db_url, slack, SIGNOFF_SLACK_CHANNEL_PACE_SECONDS="0.12")
    try:
        yield running
    finally:
        await running.stop()


async def test_a_burst_into_one_channel_posts_every_card_without_a_429(paced: App) -> None:
    app, slack = paced, paced.slack

    async def submit(n: int) -> None:
        status, body = await app.api("POST", "/api/v1/approvals", json=approval_body(summary=f"Refund {n}"))
        assert status == 201, body

    await asyncio.gather(*(submit(n) for n in range(BURST)))
    posted = await slack.wait_for("chat.postMessage", count=BURST, timeout=60)
    assert len(posted) == BURST
    limited = [c for c in slack.calls_to("chat.postMessage", ok_only=False) if c.status == 429]
    print(f"\n{BURST} cards into one channel: {len(limited)} answers of 429")
    assert limited == []


async def test_a_429_delays_only_its_own_channel(db_url: str, slack: FakeSlack) -> None:
    clock = ShiftedClock()
    slack.add_channel("C2", "other")
    app = await start_app(db_url, slack, clock=clock, SIGNOFF_SLACK_CHANNEL_PACE_SECONDS="1")
    try:
        slack.fail("chat.postMessage", status=429, retry_after=30)
        first = await app.submit(channel="C1")
        await slack.wait_for("chat.postMessage", ok_only=False)  # C1's post: 429, back in 30 s
        second = await app.submit(channel="C2")
        card = await app.card(second["id"])  # C2 is not held back by C1's 429
        assert card.channel == "C2"
        _, body = await app.api("GET", f"/api/v1/approvals/{first['id']}")
        assert body["card"] is None
        clock.advance(31)
        assert app.signoff is not None
        await app.signoff.dispatcher.drain()
        assert (await app.card(first["id"])).channel == "C1"
    finally:
        await app.stop()


async def test_two_replicas_share_one_channels_pace(db_url: str, slack: FakeSlack) -> None:
    """Each replica alone keeps the pace; together they must too (the slots live in the database).

    Slack's limit 0.05 s, our pace 0.4 s: a slot is taken in the database and the post follows it on
    the network, so the margin covers the jitter of two servers, Slack and the test sharing one event
    loop (posts were seen 0.19 s after their slot). Without shared slots both replicas post their
    first cards at once and collide (0.05 s apart or less)."""
    slack.pace(0.05)
    replicas = [await start_app(db_url, slack, SIGNOFF_SLACK_CHANNEL_PACE_SECONDS="0.4") for _ in range(2)]
    try:
        async def submit(app: App, n: int) -> None:
            status, body = await app.api("POST", "/api/v1/approvals", json=approval_body(summary=f"Refund {n}"))
            assert status == 201, body

        await asyncio.gather(*(submit(replicas[n % 2], n) for n in range(24)))
        posted = await slack.wait_for("chat.postMessage", count=24, timeout=60)
        assert len(posted) == 24
        limited = [c for c in slack.calls_to("chat.postMessage", ok_only=False) if c.status == 429]
        print(f"\n24 cards into one channel from two replicas: {len(limited)} answers of 429")
        assert limited == []
    finally:
        for app in replicas:
            await app.stop()


async def test_a_channels_next_post_waits_for_the_answer_of_the_one_in_flight() -> None:
    """A post that took its slot but is still on its way (a busy loop) holds its channel until it is
    answered, and the next one goes at least half an interval after that answer."""
    clock, pace = one_second_pace()
    assert await pace.wait_for("C1") == 0  # slot taken, post in flight
    clock.advance(seconds=1.5)  # past its slot, but no answer yet: held
    assert await pace.wait_for("C1") == 0.5 and await pace.wait_for("C2") == 0  # other channels go on
    pace.sent("C1")  # answered 1.5 s after its slot
    assert await pace.wait_for("C1") == 0.5  # half an interval after the answer
    clock.advance(seconds=0.5)
    assert await pace.wait_for("C1") == 0
    pace.sent("C1")
    clock.advance(seconds=0.2)  # answered on time: the full interval from its slot still counts
    assert await pace.wait_for("C1") == 0.8
    clock.advance(seconds=0.8)
    assert await pace.wait_for("C1") == 0
    clock.advance(seconds=FLIGHT.total_seconds())  # a call that never reported back holds its channel no longer
    assert await pace.wait_for("C1") == 0


async def test_waiting_posts_keep_their_places_in_the_channels_queue() -> None:
    """Each waiting post (its outbox item id) is given its own turn, one interval after the one ahead
    of it, in the order the items were enqueued; a newcomer goes behind them, and each posts on
    coming back at its turn."""
    clock, pace = one_second_pace()
    assert await pace.wait_for("C1", 1) == 0  # posts now
    pace.sent("C1")
    assert [await pace.wait_for("C1", k) for k in (2, 4)] == [1.0, 2.0]
    assert await pace.wait_for("C1", 3) == 2.0  # enqueued before 4, asked after it: goes before it
    assert await pace.wait_for("C2", 9) == 0  # another channel does not queue behind C1
    clock.advance(seconds=1)
    assert await pace.wait_for("C1", 5) == 3.0  # a newcomer, behind 4, though the channel is free now
    assert await pace.wait_for("C1", 2) == 0  # 2's turn
    pace.sent("C1")
    assert await pace.wait_for("C1", 4) == 2.0  # back early: one interval after 3's turn
    clock.advance(seconds=1)
    assert await pace.wait_for("C1", 3) == 0
    pace.sent("C1")
    clock.advance(seconds=1)
    assert await pace.wait_for("C1", 4) == 0
    pace.sent("C1")
    clock.advance(seconds=1)
    assert await pace.wait_for("C1", 5) == 0
    assert pace._queues == {}


async def test_a_429_moves_the_whole_queue_back_once() -> None:
    clock, pace = one_second_pace()
    assert await pace.wait_for("C1", 1) == 0
    pace.sent("C1")
    assert [await pace.wait_for("C1", k) for k in (2, 3, 4)] == [1.0, 2.0, 3.0]
    await pace.rate_limited("C1", 30)  # 1's post was answered 429: nothing before 30 s from now
    clock.advance(seconds=1)
    assert await pace.wait_for("C1", 1) == 29.0  # its retry: first still, at the channel's next slot
    assert await pace.wait_for("C1", 2) == 30.0  # back at its old turn: one interval after 1
    clock.advance(seconds=1)
    assert await pace.wait_for("C1", 3) == 30.0
    clock.advance(seconds=1)
    assert await pace.wait_for("C1", 4) == 30.0
    clock.advance(seconds=27)
    assert await pace.wait_for("C1", 1) == 0
    assert await pace.wait_for("C1", 2) == 1.0  # first now, one interval after 1 (in flight)
    pace.sent("C1")
    clock.advance(seconds=1)
    assert await pace.wait_for("C1", 2) == 0


async def test_a_post_that_never_comes_back_is_forgotten_and_holds_nobody_up() -> None:
    """A queued item that went elsewhere (another replica posted it, its request was decided) holds
    the one behind it no longer than its own turn; then it is forgotten."""
    clock, pace = one_second_pace()
    assert await pace.wait_for("C1", 1) == 0
    pace.sent("C1")
    assert [await pace.wait_for("C1", k) for k in (2, 3)] == [1.0, 2.0]  # 2 will never come back
    clock.advance(seconds=2)
    assert await pace.wait_for("C1", 3) == 0  # its turn: one interval after 2's
    pace.sent("C1")
    assert await pace.wait_for("C1", 4) == 1.0  # not behind 2, which is late by more than a turn
    clock.advance(seconds=STALE.total_seconds() + 1)
    assert await pace.wait_for("C1", 5) == 0
    assert 2 not in pace._queues.get("C1", {})


async def test_posts_that_ask_while_one_is_in_flight_get_whole_intervals() -> None:
    """Asked while the channel's post is still on its way, each waiting post is told its own slot,
    one interval apart from the slot in flight: not half an interval (it would come back too early
    and be put back once more)."""
    clock, pace = one_second_pace()
    assert await pace.wait_for("C1", 1) == 0  # in flight, unanswered
    assert [await pace.wait_for("C1", k) for k in (2, 3, 4)] == [1.0, 2.0, 3.0]


async def test_queues_whose_posts_all_went_elsewhere_are_forgotten() -> None:
    """One queue per channel (a DM is a channel of its own): a queue whose keys never came back is
    dropped once there are many, so they cannot pile up."""
    clock, pace = one_second_pace()
    for n in range(1_001):
        assert await pace.wait_for(f"D{n}", 1) == 0
        assert await pace.wait_for(f"D{n}", 2) == 1.0  # queued; its item then goes elsewhere
    assert len(pace._queues) == 1_001
    clock.advance(seconds=STALE.total_seconds() + 2)
    assert await pace.wait_for("C1", 3) == 0
    assert pace._queues == {}


async def test_a_backlog_in_one_channel_is_put_back_once_per_card_and_posted_in_order(
        db_url: str, slack: FakeSlack) -> None:
    """Cards waiting for their channel's pace are each put back until their own turn. (Put back only
    until the channel's next slot, every waiting card was claimed, rendered and put back again at
    every slot: a backlog's cost grew with its square, 60-75 % of a core for 1,500 cards in one
    channel, while one card a second went out.)"""
    app = await start_app(db_url, slack, SIGNOFF_SLACK_CHANNEL_PACE_SECONDS="0.3")
    try:
        n = 20
        for k in range(n):
            status, body = await app.api("POST", "/api/v1/approvals", json=approval_body(summary=f"Refund {k}"))
            assert status == 201, body
        posted = await slack.wait_for("chat.postMessage", count=n, timeout=60)
        assert [c.args["text"].split("Refund ")[1].split()[0].strip("*:") for c in posted] == [str(k) for k in range(n)]
        put_back = await metric(app.url, "signoff_outbox_deliveries_total", kind=effects.POST_CARD, result="retry")
        print(f"\n{n} cards into one channel: put back {put_back:.0f} times")
        # Each card about once: a card comes back early once more when the posts ahead of it ran late
        # (this test's loop also runs the fake Slack and the submits). Before: 107-145 for these 20.
        assert put_back <= 2.5 * n
    finally:
        await app.stop()
