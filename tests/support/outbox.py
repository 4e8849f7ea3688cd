"""The outbox in tests: deliver what is due, and prove what a refusal left unchanged."""

from __future__ import annotations

import asyncio
from typing import Any

import sqlalchemy as sa

from storage.schema import votes
from tests.support.app import App
from tests.support.waits import until


async def drain(app: App) -> None:
    """Once the acked Slack requests' listeners are done (a click's decision runs after its ack, and in a
    burst later still), one pass of the outbox: deliver everything due now (what that enqueues may still
    be due)."""
    assert app.signoff is not None
    await listeners_done(app)
    await app.signoff.dispatcher.drain()


async def settle(app: App) -> None:
    """Let the outbox deliver everything due now, and what that enqueues in turn.

    Dispatcher.drain alone can return while an item the background loop delivered has just
    enqueued a follower (an escalation's DMs): drain until nothing due is left pending.
    """
    assert app.signoff is not None
    dispatcher, store = app.signoff.dispatcher, app.signoff.store
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30  # a bound in time, as `until`'s, not in passes: a loaded machine is slow
    while loop.time() < deadline:
        await dispatcher.drain()
        now = dispatcher.clock.now()
        if not any(i.status == "pending" and i.next_attempt_at is not None and i.next_attempt_at <= now
                   for i in await store.outbox_items()):
            return
        await asyncio.sleep(0.005)
    left = [(i.kind, i.status, i.attempts, i.next_attempt_at) for i in await store.outbox_items()
            if i.status == "pending"]
    raise AssertionError(f"the outbox did not settle in 30 s; pending: {left}")


async def listeners_done(app: App) -> None:
    """Until every acked Slack request's listener has finished (what it fails with is logged by then)."""
    signoff = app.signoff
    assert signoff is not None
    await until(lambda: not len(signoff.backlog) and not signoff.background,
                "the listeners of the acked Slack requests to finish")


async def finished(app: App) -> None:
    """Until the listeners still running after their acks are done, and the outbox delivered what is due."""
    await listeners_done(app)
    await settle(app)


async def snapshot(app: App, request_id: str) -> tuple[Any, ...]:
    """Everything stored about a request (row, audit, outbox, votes): to prove a refused click,
    submission or input wrote nothing."""
    assert app.signoff is not None
    store = app.signoff.store
    return (await store.get_request(request_id), await store.audit_events(request_id),
            await store.outbox_items(request_id), await vote_rows(app, request_id))


async def vote_rows(app: App, request_id: str) -> list[str]:
    """The voters stored in the votes table for a request."""
    assert app.signoff is not None
    async with app.signoff.store.engine.connect() as conn:  # type: ignore[attr-defined]
        rows = await conn.execute(sa.select(votes.c.voter_id).where(votes.c.request_id == request_id))
        return sorted(r[0] for r in rows)
