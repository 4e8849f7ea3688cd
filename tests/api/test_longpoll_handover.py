"""A long-poll woken while this process is deciding its request waits for the decision to hand the
decided request over, instead of reading it back (bot/approvals/service.py `wait`).

On PostgreSQL the race is real: a decision's NOTIFY goes out as it commits, on the listener's
connection, while the statement's result travels on the writer's; the listener can hear it first
(18 % of lone clicks in a trace of bench.core's wake phase) and the waiter used to read a row the
decision was about to hand it. The test makes that order happen: it holds the request's row lock,
so the click's decision waits inside the database; sends a notification for the request (as another
process's commit, or this one's own, reaches the listener); waits until the listener heard it; then
lets the decision commit. On SQLite there is no notification (the cross-process watcher looks only
between this process's units): the same click is checked for the same hand-over.

`signoff_longpoll_rereads_total` counts the reads of woken long-polls.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
from sqlalchemy.engine import make_url

from bot.domain.model import Outcome, Status, Via
from bot.approvals.service import Service
from storage.sql_statements import NOTIFY_CHANNEL
from tests.support.outbox import drain
from tests.support.app import App

from tests.support.waits import long_poll_registered, metric, until_metric

REREADS = "signoff_longpoll_rereads_total"
HEARD = "signoff_longpoll_notifications_total"
LOOKED = "signoff_longpoll_watch_changes_total"


async def long_poll(app: App, request_id: str) -> tuple[asyncio.Task[tuple[int, dict]], float]:
    """A long-poll on `request_id`, registered; and the re-reads so far. On SQLite the cross-process
    watcher looks at the audit rows since its last look as soon as someone waits, and wakes the
    waiters of those ids (this request's own rows among them): that wake-up's read is counted first."""
    looked = await metric(app.url, LOOKED)
    waiter = asyncio.create_task(app.api("GET", f"/api/v1/approvals/{request_id}?wait=20"))
    await long_poll_registered(app.url)
    assert app.signoff is not None
    if app.signoff.store.dialect == "sqlite":
        await until_metric(app.url, LOOKED, looked + 1)
    return waiter, await metric(app.url, REREADS)


async def connect(db_url: str) -> asyncpg.Connection:
    return await asyncpg.connect(make_url(db_url).set(drivername="postgresql").render_as_string(hide_password=False))


async def until_waiting_on_a_lock(conn: asyncpg.Connection) -> None:
    """Until another backend waits for a row lock in an UPDATE of requests (the click's decision)."""
    for _ in range(2000):
        waiting = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE requests%'"
            " AND pid <> pg_backend_pid()")
        if waiting:
            return
        await asyncio.sleep(0.005)  # test-side only: polling the observable state
    raise AssertionError("the decision never waited for the row lock")


async def test_a_wake_up_while_this_process_decides_is_not_read_back(app: App, db_url: str) -> None:
    assert app.signoff is not None
    req = await app.submit(approvers=["U1"])
    await app.card(req["id"])
    await drain(app)
    waiter, rereads = await long_poll(app, req["id"])
    if app.signoff.store.dialect == "postgresql":
        locker, notifier = await connect(db_url), await connect(db_url)
        try:
            heard = await metric(app.url, HEARD)
            lock = locker.transaction()
            await lock.start()
            await locker.execute("SELECT 1 FROM requests WHERE id = $1 FOR UPDATE", req["id"])
            clicked = asyncio.create_task(app.click(req["id"], "U1", user_name="alice"))
            await until_waiting_on_a_lock(notifier)
            await notifier.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, req["id"])
            await until_metric(app.url, HEARD, heard + 1)  # the listener woke the waiter ...
            await metric(app.url, HEARD)  # ... and the waiter has run since (this scrape came after it)
            assert not waiter.done()
            await lock.rollback()  # the decision commits now
            assert (await clicked).status == 200
        finally:
            await locker.close()
            await notifier.close()
    else:
        assert (await app.click(req["id"], "U1", user_name="alice")).status == 200
    status, body = await waiter
    assert status == 200 and body["status"] == "approved" and body["decision"]["decided_by"]["id"] == "U1"
    assert await metric(app.url, REREADS) == rereads  # handed over: not read back


class Broke(Exception):
    pass


async def test_a_wake_up_held_back_for_a_decision_that_fails_is_delivered_when_it_ends(app: App) -> None:
    """The other side of the rule: a wake-up held back for a decision in flight is not lost when that
    decision does not commit (here its unit raises after the wake-up came). The waiter reads then,
    finds the request still pending, and goes on waiting, for the decision that does commit."""
    assert app.signoff is not None
    service = app.signoff.service
    req = await app.submit(approvers=["U1"])
    await app.card(req["id"])
    await drain(app)
    waiter, rereads = await long_poll(app, req["id"])

    async def heard_meanwhile_then_fail(_unit: object) -> None:
        service.waiters.wake(req["id"])  # a notification reaches the listener while the decision is in flight
        for _ in range(1000):  # until the waiter has handled it: it holds back (its request is being decided)
            if service.in_flight.holding(req["id"]):
                break
            await asyncio.sleep(0.001)
        assert service.in_flight.holding(req["id"])
        assert await metric(app.url, REREADS) == rereads
        raise Broke  # the decision's unit rolls back: nothing is written, nothing handed over

    try:
        await service.decide(req["id"], Outcome.APPROVED, via=Via.API, also=heard_meanwhile_then_fail)
        raise AssertionError("the decision did not fail")
    except Broke:
        pass
    await until_metric(app.url, REREADS, rereads + 1)  # woken again when it ended: it read the request once
    assert not waiter.done()  # still pending: it waits on
    assert (await app.click(req["id"], "U1", user_name="alice")).status == 200
    status, body = await waiter
    assert status == 200 and body["status"] == "approved"


async def test_a_wake_up_that_comes_due_at_the_deadline_reads_the_request_rather_than_hold_back(app: App) -> None:
    """A wake-up that the waiter only gets to handle at or after its deadline (the event loop was busy)
    is not held back for a decision in flight here: the long-poll ends now, so it reads the request
    and answers with it as it is (here decided by another process), never with the state it had."""
    assert app.signoff is not None
    service = app.signoff.service
    req = await app.submit(approvers=["U1"])
    await app.card(req["id"])
    await drain(app)
    waiting = asyncio.create_task(service.wait(req["id"], 0.3))
    await asyncio.sleep(0)  # registered, and has read the request: pending
    service.in_flight.begin(req["id"])  # this process is deciding it (and will lose) ...
    try:
        other = Service(app.signoff.store)  # ... while another process decides it (its own waiters)
        assert (await other.decide(req["id"], Outcome.APPROVED, via=Via.API)).won
        # Heard through NOTIFY or the SQLite watcher meanwhile, or not yet: held back either way.
        assert not waiting.done()
        service.waiters.wake(req["id"])  # a wake-up of it comes now ...
        time.sleep(0.35)  # ... and the event loop is busy until past the waiter's deadline
        got = await waiting
    finally:
        service.in_flight.end(req["id"])
    assert got.status is Status.APPROVED  # read at its deadline, not the pending state it had
