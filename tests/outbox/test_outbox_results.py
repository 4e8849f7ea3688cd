"""The outbox writes its deliveries' results in groups: deliveries that finish while one result unit
is being written share the next one (storage.group_commit), and a group that fails is written again item
by item, so one item's failing write never loses another item's done mark, audit or stored ts.

The dispatcher runs on the test's real database with handlers of its own kinds: each returns at
once, so the deliveries of one claim all finish in the same turn of the loop and meet in one group.
"""

from __future__ import annotations



from bot.domain.model import AuditEvent, Request
from bot.process.metrics import Metrics
from bot.approvals.outbox_rows import OutboxRows
from bot.outbox.dispatcher import Dispatcher, Done, Handler, Result
from bot.domain.outbox import OutboxItem
from storage.base import Unit
from storage.sql import SqlStore
from tests.fakes.clock import FakeClock
from tests.storage.run_values import make_request

ITEMS = 10


def deliveries(request: Request, clock: FakeClock, *, failing: set[str]) -> dict[str, Handler]:
    """`test.done`: done, with a "delivered" audit row; the one whose key is in `failing` also writes
    the request's row again in its result's unit, which the database refuses (a duplicate id)."""

    async def deliver(item: OutboxItem) -> Result:
        audit = (AuditEvent(request.id, "delivered", clock.now(), None, {"key": item.dedupe_key}),)
        if item.dedupe_key not in failing:
            return Done(audit=audit)

        async def write_again(unit: Unit) -> None:
            await unit.insert_request(request)

        return Done(apply=write_again, audit=audit)

    return {"test.done": deliver}


async def enqueue(store: SqlStore, request: Request, clock: FakeClock) -> None:
    async with store.unit() as unit:
        await unit.insert_request(request)
        for n in range(ITEMS):  # unordered (no request): all of them are delivered at once
            await unit.enqueue(OutboxItem.due("test.done", f"test:{n}", clock.now(), ordered_by=None, payload={}))


def count_statements(store: SqlStore, prefix: str) -> list[int]:
    """A counter of executions (an executemany is one) of statements starting with `prefix`, or holding
    it as a CTE (PostgreSQL writes a group of plain results as one statement, storage/postgres/outbox.py)."""
    seen = [0]

    def on_execute(statement: str) -> None:
        if statement.lstrip().startswith(prefix) or f"AS ({prefix}" in statement:
            seen[0] += 1

    store.watch(on_execute)  # both of PostgreSQL's pools (storage/postgres/raw.py)
    return seen


async def test_results_that_finish_together_are_written_in_one_unit(store: SqlStore) -> None:
    clock = FakeClock()
    request = make_request(created_at=clock.now(), updated_at=clock.now())
    await enqueue(store, request, clock)
    dispatcher = Dispatcher(OutboxRows(store), deliveries(request, clock, failing=set()), clock=clock, metrics=Metrics())
    done_marks = count_statements(store, "UPDATE outbox SET status")
    audit_rows = count_statements(store, "INSERT INTO audit_events")

    await dispatcher.drain()

    items = await store.outbox_items()
    assert [i.status for i in items] == ["done"] * ITEMS
    assert (done_marks[0], audit_rows[0]) == (1, 1)  # one unit wrote all ten: each of its statements once
    audit = await store.audit_events(request.id)
    assert sorted(e.data["key"] for e in audit if e.type == "delivered") == sorted(f"test:{n}" for n in range(ITEMS))


async def test_a_failing_result_in_a_group_loses_no_other_items_mark(store: SqlStore) -> None:
    clock = FakeClock()
    request = make_request(created_at=clock.now(), updated_at=clock.now())
    await enqueue(store, request, clock)
    dispatcher = Dispatcher(OutboxRows(store), deliveries(request, clock, failing={"test:4"}), clock=clock, metrics=Metrics())

    await dispatcher.drain()

    by_key = {i.dedupe_key: i for i in await store.outbox_items()}
    assert {k: i.status for k, i in by_key.items() if k != "test:4"} == {f"test:{n}": "done" for n in range(ITEMS)
                                                                         if n != 4}
    # Its result could not be written: it stays claimed, and the sweep takes it again once its lease
    # runs out (an attempt whose outcome is unknown to the next try).
    failed = by_key["test:4"]
    assert (failed.status, failed.attempts) == ("pending", 1)
    clock.advance(seconds=dispatcher.lease_seconds + 1)
    retaken = await store.claim_outbox(clock.now(), limit=10, lease_seconds=60)
    assert [i.dedupe_key for i in retaken] == ["test:4"] and retaken[0].uncertain
    audit = await store.audit_events(request.id)
    assert sorted(e.data["key"] for e in audit if e.type == "delivered") == sorted(
        f"test:{n}" for n in range(ITEMS) if n != 4)  # the failing item's audit row went with its unit
