"""The outbox dispatcher looks for due items (a claiming transaction) when some can be there: after a
commit that enqueued, when due items waited for a free slot, or when an item put back falls due. Not
after every finished delivery: that look found nothing, and it cost a write transaction twice per
approval (the card's post and its update). Only its periodic look also reads when the next item is
due (`next_outbox_due`): the read after every claim cost a statement per card."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


from bot.sandbox import SlackEmulator
from tests.fakes.clock import FakeClock
from tests.support.app import start_app
from tests.support.waits import metric, until


async def test_a_delivery_that_finishes_does_not_make_the_dispatcher_look_again(
        db_url: str, slack: SlackEmulator) -> None:
    # The clock stands still and the periodic sweep is an hour away: only wake-ups make it look.
    app = await start_app(db_url, slack, clock=FakeClock(), SIGNOFF_OUTBOX_SWEEP_SECONDS="3600")
    try:
        assert app.signoff is not None
        dispatcher = app.signoff.dispatcher
        await asyncio.wait_for(dispatcher.idle.wait(), 10)  # its first look, at start, found nothing

        async def looks_for(work: Callable[[], Awaitable[object]]) -> float:
            before = await metric(app.url, "signoff_sweeps_total", kind="outbox")
            dispatcher.idle.clear()
            await work()
            await asyncio.wait_for(dispatcher.idle.wait(), 10)  # delivered, and nothing left in flight
            return await metric(app.url, "signoff_sweeps_total", kind="outbox") - before

        request = await app.submit()
        await app.card(request["id"])
        await asyncio.wait_for(dispatcher.idle.wait(), 10)
        second = await looks_for(app.submit)
        assert second == 1  # the submit's commit woke it: the card post, and no look after it

        assert await looks_for(lambda: app.click(request["id"], "U1")) == 1  # the decision's: the card update
        await slack.wait_for("chat.update")
        _, decided = await app.api("GET", f"/api/v1/approvals/{request['id']}")
        assert decided["status"] == "approved"
        assert [c.method for c in slack.calls if c.ok and c.method != "auth.test"] == [  # auth.test: team check
            "chat.postMessage", "chat.postMessage", "chat.update"]
    finally:
        await app.stop()


async def test_an_item_put_back_is_looked_at_again_when_it_is_due(db_url: str, slack: SlackEmulator) -> None:
    """A failed post is retried: its put-back wakes the loop, which reckons the retry's due time."""
    app = await start_app(db_url, slack, SIGNOFF_OUTBOX_SWEEP_SECONDS="3600")
    try:
        slack.fail("chat.postMessage", status=500, times=1)
        request = await app.submit()
        await app.card(request["id"], timeout=20)  # retried after its backoff (about a second), not the hour
        assert [c.status for c in slack.calls if c.method == "chat.postMessage"] == [500, 200]
    finally:
        await app.stop()


async def test_a_card_post_and_its_update_each_cost_one_claim_and_no_read_of_the_next_due_time(
        db_url: str, slack: SlackEmulator) -> None:
    """Per delivered card: one claiming statement (and no read of the request: bot/live/just_committed.py); the next due time is
    read by the periodic look only (an hour away here), never after a claim that woke on a commit."""
    app = await start_app(db_url, slack, clock=FakeClock(), SIGNOFF_OUTBOX_SWEEP_SECONDS="3600")
    statements: list[str] = []
    assert app.signoff is not None
    store, dispatcher = app.signoff.store, app.signoff.dispatcher
    stop = None
    try:
        await asyncio.wait_for(dispatcher.idle.wait(), 10)  # its first look, at start (it reads the due time)
        stop = store.watch(lambda statement: statements.append(" ".join(statement.split())))  # both pools
        request = await app.submit()
        await app.card(request["id"])
        await app.click(request["id"], "U1")
        await slack.wait_for("chat.update")
        async def all_done() -> bool:
            return all(i.status == "done" for i in await store.outbox_items())

        await until(all_done, "the update's result to be written")
        claims = [s for s in statements if s.startswith("UPDATE outbox SET attempts")]
        due_reads = [s for s in statements if s.startswith("SELECT min(") and "FROM outbox" in s]
        done_marks = [s for s in statements if s.startswith("UPDATE outbox SET status")  # or in one statement:
                      or "AS (UPDATE outbox SET status = 'done'" in s]  # PostgreSQL, storage/postgres/outbox.py
        assert (len(claims), len(due_reads), len(done_marks)) == (2, 0, 2), [s[:150] for s in statements]
        assert [c.method for c in slack.calls if c.ok and c.method != "auth.test"] == [  # auth.test: team check
            "chat.postMessage", "chat.update"]
    finally:
        if stop is not None:
            stop()
        await app.stop()
