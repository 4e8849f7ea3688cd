"""The storage contract: what every Store / Unit must do, run against every backend of `backends.py`.

The tests speak only to the `Store` / `Unit` interfaces, through the `store` and `store_factory`
fixtures (tests/storage/conftest.py). The SQL backend runs on SQLite by default, and on PostgreSQL
when SIGNOFF_TEST_DATABASE_URL is set; test_schema.py proves its migrated schema.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from bot.domain.model import (
    Action,
    Actor,
    AuditEvent,
    Change,
    Decision,
    Kind,
    Outcome,
    Preview,
    Request,
    Risk,
    Status,
    Via,
)
from bot.domain.outbox import OutboxItem
from storage.base import DuplicateIdempotencyKey, Store
from tests.storage.conftest import StoreFactory

T0 = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def make_request(request_id: str | None = None, **changes: Any) -> Request:
    base = Request(
        id=request_id or f"apr_{uuid.uuid4().hex[:20]}",
        kind=Kind.APPROVAL,
        status=Status.PENDING,
        action=Action("send_email", {"to": "a@example.com"}),
        summary="Send an email",
        risk=Risk.HIGH,
        channel="C1",
        created_at=T0,
        updated_at=T0,
    )
    return base.evolve(**changes)


def full_request() -> Request:
    """A request with every field set, unicode included, params in a deliberately unsorted order."""
    params = {"zeta": "last letter first", "alpha": 1, "mid": {"y": [3, 2, 1], "x": None}, "émoji": "✉️ 日本語"}
    schema = {
        "type": "object",
        "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}, "mid": {"type": "object"},
                       "émoji": {"type": "string"}},
        "required": ["zeta", "alpha"],
    }
    return make_request(
        "apr_full_0001",
        action=Action("send_email", params, schema),
        summary="Envoyer l'e-mail à Zoë — 「確認」 🚀",
        context="Line one\nline two <@U123> <!channel> `code`",
        preview=Preview("email", {"to": ["zoë@example.com"], "cc": [], "subject": "Grüße", "body": "Hallo\nWelt"}),
        risk=Risk.CRITICAL,
        channel="C0123ABCD",
        approvers=("U1", "SOPS", "W2"),
        callback_url="https://agent.example.com/hook?x=1",
        requested_by="agent-ünïcode",
        card_channel="C0123ABCD",
        card_ts="1700000000.000100",
        thread_ts="1700000000.000050",
        idempotency_key="key-ü-1",
        body_hash="a" * 64,
        next_due_at=T0 + timedelta(hours=1),
        extra={"b": 2, "a": [1, {"z": 0, "y": 1}]},
    )


async def insert(store: Store, *requests: Request) -> None:
    async with store.unit() as unit:
        for request in requests:
            await unit.insert_request(request)


def outbox_item(key: str, *, at: datetime = T0, request_id: str | None = None, **payload: Any) -> OutboxItem:
    return OutboxItem(kind="webhook", dedupe_key=key, payload={"k": key, **payload}, request_id=request_id,
                      created_at=at, next_attempt_at=at)


def iid(item: OutboxItem) -> int:
    assert item.id is not None
    return item.id


async def enqueue(store: Store, *items: OutboxItem) -> list[bool]:
    async with store.unit() as unit:
        return [await unit.enqueue(item) for item in items]


def keys_in_order(value: Any) -> Any:
    """The key order of every object inside `value` (dict equality ignores it)."""
    if isinstance(value, dict):
        return [[k, keys_in_order(v)] for k, v in value.items()]
    if isinstance(value, list):
        return [keys_in_order(v) for v in value]
    return value


# -- requests and decisions ------------------------------------------------------------------------


async def test_request_round_trip_keeps_every_field_and_key_order(store: Store) -> None:
    request = full_request()
    await insert(store, request)
    for read in (await store.get_request(request.id), await _unit_get(store, request.id)):
        assert read == request
        assert keys_in_order(read.action.params) == keys_in_order(request.action.params)
        assert keys_in_order(read.action.params_schema) == keys_in_order(request.action.params_schema)
        assert keys_in_order(read.extra) == keys_in_order(request.extra)
        assert keys_in_order(read.preview.data) == keys_in_order(request.preview.data)  # type: ignore[union-attr]
    async with store.unit() as unit:
        assert await unit.find_by_idempotency_key("key-ü-1") == request
        assert await unit.find_by_idempotency_key("key-other") is None
    assert await store.get_request("apr_missing") is None


async def _unit_get(store: Store, request_id: str) -> Request | None:
    async with store.unit() as unit:
        return await unit.get_request(request_id)


async def test_minimal_request_round_trip(store: Store) -> None:
    request = make_request(kind=Kind.QUESTION)
    await insert(store, request)
    read = await store.get_request(request.id)
    assert read == request
    assert read is not None and read.preview is None and read.decision is None and read.extra == {}


async def test_decision_round_trip(store: Store) -> None:
    request = full_request()
    await insert(store, request)
    decided_at = T0 + timedelta(minutes=3, microseconds=7)
    decision = Decision(
        outcome=Outcome.APPROVED,
        params={"zeta": "edited ✓", "alpha": 2, "mid": {"y": [], "x": None}, "émoji": "✉️ 日本語"},
        changes=(Change("zeta", "last letter first", "edited ✓"), Change("alpha", 1, 2), Change("new", None, [1])),
        comment="Looks good — ship it",
        decided_by=Actor("U1", "zoë"),
        decided_at=decided_at,
        via=Via.MODAL,
    )
    decided = request.evolve(status=Status.APPROVED, decision=decision, updated_at=decided_at, next_due_at=None)
    async with store.unit() as unit:
        assert await unit.update_request(decided, expected_version=1)
        await unit.insert_decision(request.id, decision)
    read = await store.get_request(request.id)
    assert read == decided.evolve(version=2)
    assert read is not None and read.decision is not None
    assert keys_in_order(read.decision.params) == keys_in_order(decision.params)
    # The proposal is kept apart from the decision.
    assert read.action == request.action


async def test_decision_without_actor_round_trip(store: Store) -> None:
    request = make_request()
    await insert(store, request)
    decision = Decision(Outcome.EXPIRED, {"to": "a@example.com"}, (), None, None, T0 + timedelta(days=1), Via.TIMEOUT)
    decided = request.evolve(status=Status.EXPIRED, decision=decision, updated_at=decision.decided_at)
    async with store.unit() as unit:
        assert await unit.update_request(decided, expected_version=1)
        await unit.insert_decision(request.id, decision)
    assert await store.get_request(request.id) == decided.evolve(version=2)


async def test_update_is_guarded_by_version(store: Store) -> None:
    request = make_request()
    await insert(store, request)
    first = request.evolve(card_channel="C1", card_ts="1.1", updated_at=T0 + timedelta(seconds=1))
    async with store.unit() as unit:
        assert await unit.update_request(first, expected_version=1) is True
    stale = request.evolve(status=Status.CANCELLED, card_ts="9.9", approvers=("UX",), extra={"stale": True},
                           updated_at=T0 + timedelta(seconds=2))
    async with store.unit() as unit:
        assert await unit.update_request(stale, expected_version=1) is False
    read = await store.get_request(request.id)
    assert read == first.evolve(version=2)
    # Every mutable field is written by a winning update.
    second = first.evolve(status=Status.CANCELLED, thread_ts="1.2", approvers=("U9",), extra={"n": 1},
                          next_due_at=T0 + timedelta(hours=2), updated_at=T0 + timedelta(seconds=3))
    async with store.unit() as unit:
        assert await unit.update_request(second, expected_version=2) is True
    assert await store.get_request(request.id) == second.evolve(version=3)


async def test_update_of_unknown_request_writes_nothing(store: Store) -> None:
    async with store.unit() as unit:
        assert await unit.update_request(make_request("apr_ghost"), expected_version=1) is False
    assert await store.get_request("apr_ghost") is None


async def test_racing_guarded_updates_exactly_one_wins(store: Store) -> None:
    for round_ in range(5):
        request = make_request()
        await insert(store, request)

        async def attempt(outcome: Status) -> bool:
            async with store.unit() as unit:
                current = await unit.get_request(request.id)
                assert current is not None
                if current.status is not Status.PENDING:
                    return False
                return await unit.update_request(current.evolve(status=outcome), expected_version=current.version)

        results = await asyncio.gather(attempt(Status.APPROVED), attempt(Status.REJECTED),
                                       attempt(Status.CANCELLED))
        assert sorted(results) == [False, False, True], round_
        read = await store.get_request(request.id)
        assert read is not None and read.version == 2
        winner = [Status.APPROVED, Status.REJECTED, Status.CANCELLED][results.index(True)]
        assert read.status is winner


async def test_racing_updates_on_a_stale_read_exactly_one_wins(store: Store) -> None:
    """Both writers read version 1 before either writes: the guard alone must settle it."""
    request = make_request()
    await insert(store, request)

    async def attempt(status: Status) -> bool:
        async with store.unit() as unit:
            return await unit.update_request(request.evolve(status=status), expected_version=1)

    results = await asyncio.gather(*(attempt(s) for s in (Status.APPROVED, Status.REJECTED) * 5))
    assert results.count(True) == 1
    read = await store.get_request(request.id)
    assert read is not None and read.version == 2


async def test_duplicate_idempotency_key_is_refused_and_first_row_is_intact(store: Store) -> None:
    first = make_request(idempotency_key="k1", body_hash="h1", summary="first")
    await insert(store, first)
    second = make_request(idempotency_key="k1", body_hash="h2", summary="second")
    with pytest.raises(DuplicateIdempotencyKey):
        async with store.unit() as unit:
            await unit.insert_request(second)
    assert await store.get_request(first.id) == first
    assert await store.get_request(second.id) is None
    async with store.unit() as unit:
        assert await unit.find_by_idempotency_key("k1") == first
    # Requests without a key never collide with each other.
    await insert(store, make_request(), make_request())
    assert len(await store.list_requests(status=None, limit=10)) == 3


async def test_concurrent_inserts_with_one_idempotency_key_store_one(store: Store) -> None:
    async def attempt(n: int) -> str:
        try:
            async with store.unit() as unit:
                await unit.insert_request(make_request(idempotency_key="same", summary=f"try {n}"))
        except DuplicateIdempotencyKey:
            return "duplicate"
        return "inserted"

    results = await asyncio.gather(*(attempt(n) for n in range(10)))
    assert sorted(results) == ["duplicate"] * 9 + ["inserted"]
    assert len(await store.list_requests(status=None, limit=20)) == 1


async def test_a_unit_that_raises_rolls_back_everything(store: Store) -> None:
    existing = make_request()
    await insert(store, existing)
    request = make_request()
    with pytest.raises(RuntimeError, match="boom"):
        async with store.unit() as unit:
            await unit.insert_request(request)
            await unit.update_request(existing.evolve(status=Status.CANCELLED), expected_version=1)
            await unit.insert_decision(request.id, Decision(Outcome.APPROVED, {}, (), None, None, T0, Via.API))
            await unit.append_audit(AuditEvent(request.id, "created", T0))
            await unit.enqueue(outbox_item("rolled-back", request_id=request.id))
            await unit.notify(request.id)
            raise RuntimeError("boom")
    assert await store.get_request(request.id) is None
    assert await store.get_request(existing.id) == existing
    assert await store.audit_events(request.id) == []
    assert await store.outbox_items() == []
    # The key and the row can be written afterwards: nothing half-done was left behind.
    await insert(store, request)
    assert await enqueue(store, outbox_item("rolled-back", request_id=request.id)) == [True]


async def test_writes_of_one_unit_are_visible_inside_it(store: Store) -> None:
    request = make_request(idempotency_key="inside")
    async with store.unit() as unit:
        await unit.insert_request(request)
        assert await unit.get_request(request.id) == request
        assert await unit.find_by_idempotency_key("inside") == request
        assert await unit.update_request(request.evolve(card_ts="1.0"), expected_version=1)
        read = await unit.get_request(request.id)
        assert read is not None and read.card_ts == "1.0" and read.version == 2


# -- listing, statuses, audit ---------------------------------------------------------------------------


async def test_list_requests_order_filter_and_pagination_with_equal_timestamps(store: Store) -> None:
    same = T0 + timedelta(minutes=5)
    ids = ["apr_e", "apr_b", "apr_d", "apr_a", "apr_c"]
    await insert(store, *(make_request(i, created_at=same, updated_at=same) for i in ids))
    await insert(store, make_request("apr_z_earliest", created_at=T0, updated_at=T0))
    later = T0 + timedelta(minutes=9)
    await insert(store, make_request("apr_0_latest", created_at=later, updated_at=later, status=Status.APPROVED))

    everything = await store.list_requests(status=None, limit=100)
    assert [r.id for r in everything] == ["apr_z_earliest", "apr_a", "apr_b", "apr_c", "apr_d", "apr_e",
                                          "apr_0_latest"]

    pages: list[list[str]] = []
    after: tuple[datetime, str] | None = None
    while True:
        page = await store.list_requests(status=Status.PENDING, limit=2, after=after)
        if not page:
            break
        pages.append([r.id for r in page])
        after = (page[-1].created_at, page[-1].id)
    assert pages == [["apr_z_earliest", "apr_a"], ["apr_b", "apr_c"], ["apr_d", "apr_e"]]

    assert [r.id for r in await store.list_requests(status=Status.APPROVED, limit=10)] == ["apr_0_latest"]
    assert await store.list_requests(status=Status.REJECTED, limit=10) == []
    # The cursor's instant counts, not its timezone.
    plus_two = timezone(timedelta(hours=2))
    tail = await store.list_requests(status=None, limit=10, after=(same.astimezone(plus_two), "apr_c"))
    assert [r.id for r in tail] == ["apr_d", "apr_e", "apr_0_latest"]


async def test_statuses(store: Store) -> None:
    a, b = make_request(), make_request(status=Status.REJECTED)
    await insert(store, a, b)
    assert await store.statuses([a.id, b.id, "apr_unknown"]) == {a.id: Status.PENDING, b.id: Status.REJECTED}
    assert await store.statuses([]) == {}
    assert await store.statuses(iter([a.id])) == {a.id: Status.PENDING}


async def test_audit_events_in_append_order(store: Store) -> None:
    a, b = make_request(), make_request()
    await insert(store, a, b)
    events = [
        AuditEvent(a.id, "created", T0, "agent", {"risk": "high", "ü": "✓"}),
        AuditEvent(b.id, "created", T0),
        AuditEvent(a.id, "posted", T0, None, {"ts": "1.0"}),
        AuditEvent(a.id, "decided", T0 - timedelta(seconds=5), "U1", {"z": 1, "a": 2}),  # order is append order
    ]
    for event in events:
        async with store.unit() as unit:
            await unit.append_audit(event)
    read = await store.audit_events(a.id)
    assert read == [events[0], events[2], events[3]]
    assert keys_in_order(read[2].data) == [["z", 1], ["a", 2]]
    assert await store.audit_events(b.id) == [events[1]]
    assert await store.audit_events("apr_none") == []


async def test_datetimes_come_back_utc_aware(store: Store) -> None:
    india = timezone(timedelta(hours=5, minutes=30))
    local = datetime(2026, 7, 4, 23, 59, 58, 999999, tzinfo=india)
    request = make_request(created_at=local, updated_at=local, next_due_at=local + timedelta(days=1))
    await insert(store, request)
    async with store.unit() as unit:
        await unit.append_audit(AuditEvent(request.id, "created", local))
    read = await store.get_request(request.id)
    assert read is not None
    for value in (read.created_at, read.updated_at, read.next_due_at, (await store.audit_events(request.id))[0].at):
        assert value is not None and value.utcoffset() == timedelta(0), value
    assert read.created_at == local and read.next_due_at == local + timedelta(days=1)
    assert read.created_at.hour == 18 and read.created_at.minute == 29  # 23:59 at +05:30 is 18:29 UTC
    assert [r.id for r in await store.list_requests(status=None, limit=5)] == [request.id]


# -- outbox ----------------------------------------------------------------------------------------------------


async def test_enqueue_dedupes_on_key(store: Store) -> None:
    assert await enqueue(store, outbox_item("a", n=1), outbox_item("b")) == [True, True]
    assert await enqueue(store, outbox_item("a", n=2)) == [False]
    items = await store.outbox_items()
    assert [(i.dedupe_key, i.payload) for i in items] == [("a", {"k": "a", "n": 1}), ("b", {"k": "b"})]
    assert all(i.status == "pending" and i.attempts == 0 and i.failures == 0 for i in items)
    # A done item still holds its key: the same effect is never stored twice.
    claimed = await store.claim_outbox(T0, limit=10, lease_seconds=60)
    async with store.unit() as unit:
        await unit.outbox_done(iid(claimed[0]), T0)
    assert await enqueue(store, outbox_item("a", n=3)) == [False]


async def test_outbox_items_filter_by_request(store: Store) -> None:
    await enqueue(store, outbox_item("r1-a", request_id="r1"), outbox_item("r2", request_id="r2"),
                  outbox_item("r1-b", request_id="r1", nested={"z": 1, "a": 2}))
    assert [i.dedupe_key for i in await store.outbox_items("r1")] == ["r1-a", "r1-b"]
    assert [i.dedupe_key for i in await store.outbox_items()] == ["r1-a", "r2", "r1-b"]
    last = (await store.outbox_items("r1"))[-1]
    assert keys_in_order(last.payload["nested"]) == [["z", 1], ["a", 2]]


async def test_claim_leases_items_and_counts_attempts(store: Store) -> None:
    await enqueue(store, outbox_item("now"), outbox_item("later", at=T0 + timedelta(seconds=30)))
    [item] = await store.claim_outbox(T0, limit=10, lease_seconds=60)
    assert (item.dedupe_key, item.attempts, item.failures, item.uncertain) == ("now", 1, 0, False)
    assert item.next_attempt_at == T0 and item.created_at == T0
    # Leased: nobody else gets it while the lease runs, even once other items fall due.
    assert await store.claim_outbox(T0, limit=10, lease_seconds=60) == []
    [later] = await store.claim_outbox(T0 + timedelta(seconds=59), limit=10, lease_seconds=60)
    assert later.dedupe_key == "later"
    # The lease ran out without a result (the process died): claimable again, and uncertain.
    [again] = await store.claim_outbox(T0 + timedelta(seconds=60), limit=10, lease_seconds=60)
    assert (again.id, again.attempts, again.failures, again.uncertain) == (item.id, 2, 0, True)


async def test_claim_respects_limit_and_id_order(store: Store) -> None:
    await enqueue(store, *(outbox_item(f"i{n}") for n in range(5)))
    first = await store.claim_outbox(T0, limit=3, lease_seconds=60)
    second = await store.claim_outbox(T0, limit=3, lease_seconds=60)
    assert [i.dedupe_key for i in first] == ["i0", "i1", "i2"]
    assert [i.dedupe_key for i in second] == ["i3", "i4"]


async def test_retry_definite_and_uncertain(store: Store) -> None:
    await enqueue(store, outbox_item("definite"), outbox_item("uncertain"))
    definite, uncertain = await store.claim_outbox(T0, limit=10, lease_seconds=60)
    retry_at = T0 + timedelta(seconds=5)
    async with store.unit() as unit:
        await unit.outbox_retry(iid(definite), retry_at, "HTTP 400 before any effect", definite=True)
        await unit.outbox_retry(iid(uncertain), retry_at, "timeout " + "x" * 5000, definite=False)
    # Not due before its retry time, due at it (well before the old lease's end: the lease is released).
    assert await store.claim_outbox(retry_at - timedelta(microseconds=1), limit=10, lease_seconds=60) == []
    again = {i.dedupe_key: i for i in await store.claim_outbox(retry_at, limit=10, lease_seconds=60)}
    assert (again["definite"].attempts, again["definite"].failures, again["definite"].uncertain) == (2, 1, False)
    assert (again["uncertain"].attempts, again["uncertain"].failures, again["uncertain"].uncertain) == (2, 0, True)
    assert again["definite"].last_error == "HTTP 400 before any effect"
    assert again["uncertain"].last_error is not None and again["uncertain"].last_error.startswith("timeout x")
    assert again["definite"].next_attempt_at == retry_at


async def test_postpone_gives_the_claim_back_untried(store: Store) -> None:
    """An item that waited for its turn (its card's post, the channel's pace) was not attempted: its
    attempts and failures stay as they were, so backoff and `uncertain` do not grow from waiting."""
    await enqueue(store, outbox_item("sure"), outbox_item("unsure"))
    sure, unsure = await store.claim_outbox(T0, limit=10, lease_seconds=60)
    async with store.unit() as unit:
        await unit.outbox_retry(iid(unsure), T0, "timeout", definite=False)  # unsure: may have taken effect
    [unsure] = await store.claim_outbox(T0, limit=10, lease_seconds=60)
    assert (unsure.attempts, unsure.uncertain) == (2, True)
    later = T0 + timedelta(seconds=2)
    for n in range(5):  # waits its turn five times
        async with store.unit() as unit:
            await unit.outbox_postpone(iid(sure), later)
            await unit.outbox_postpone(iid(unsure), later)
        assert await store.claim_outbox(later - timedelta(microseconds=1), limit=10, lease_seconds=60) == []
        again = {i.dedupe_key: i for i in await store.claim_outbox(later, limit=10, lease_seconds=60)}
        assert (again["sure"].attempts, again["sure"].failures, again["sure"].uncertain) == (1, 0, False)
        assert (again["unsure"].attempts, again["unsure"].failures, again["unsure"].uncertain) == (2, 0, True)
        assert again["unsure"].last_error == "timeout"


async def test_done_and_dead_are_never_claimed_again(store: Store) -> None:
    await enqueue(store, outbox_item("done"), outbox_item("dead"), outbox_item("open"))
    done, dead, _open = await store.claim_outbox(T0, limit=10, lease_seconds=1)
    async with store.unit() as unit:
        await unit.outbox_done(iid(done), T0 + timedelta(seconds=1))
        await unit.outbox_dead(iid(dead), T0 + timedelta(seconds=1), "gave up after 8 attempts")
    much_later = T0 + timedelta(days=30)
    [reclaimed] = await store.claim_outbox(much_later, limit=10, lease_seconds=60)
    assert reclaimed.dedupe_key == "open"
    states = {i.dedupe_key: (i.status, i.last_error) for i in await store.outbox_items()}
    assert states == {"done": ("done", None), "dead": ("dead", "gave up after 8 attempts"),
                      "open": ("pending", None)}


async def test_a_failed_result_write_rolls_back_with_its_unit(store: Store) -> None:
    await enqueue(store, outbox_item("x"))
    [item] = await store.claim_outbox(T0, limit=1, lease_seconds=60)
    with pytest.raises(RuntimeError):
        async with store.unit() as unit:
            await unit.outbox_done(iid(item), T0)
            raise RuntimeError("the handler's own write failed")
    [stored] = await store.outbox_items()
    assert stored.status == "pending"


async def test_next_outbox_due(store: Store) -> None:
    assert await store.next_outbox_due() is None
    await enqueue(store, outbox_item("done-early", at=T0 - timedelta(hours=1)),
                  outbox_item("leased", at=T0), outbox_item("waiting", at=T0 + timedelta(seconds=90)))
    [done] = await store.claim_outbox(T0 - timedelta(hours=1), limit=1, lease_seconds=60)
    async with store.unit() as unit:
        await unit.outbox_done(iid(done), T0)
    due = await store.next_outbox_due()
    assert due == T0 and due is not None and due.utcoffset() == timedelta(0)  # done items do not count
    # In flight: the leased item counts from the end of its lease.
    [leased] = await store.claim_outbox(T0, limit=1, lease_seconds=30)
    assert leased.dedupe_key == "leased"
    assert await store.next_outbox_due() == T0 + timedelta(seconds=30)
    [leased_again] = await store.claim_outbox(T0 + timedelta(seconds=30), limit=1, lease_seconds=120)
    assert await store.next_outbox_due() == T0 + timedelta(seconds=90)  # now "waiting" is first
    async with store.unit() as unit:
        await unit.outbox_dead(iid(leased_again), T0, "no")
    assert await store.next_outbox_due() == T0 + timedelta(seconds=90)


async def test_two_stores_claiming_at_once_never_share_an_item(store_factory: StoreFactory) -> None:
    stores = [await store_factory(), await store_factory()]
    await enqueue(stores[0], *(outbox_item(f"i{n:02d}") for n in range(40)))

    async def drain(s: Store) -> list[int]:
        got: list[int] = []
        while batch := await s.claim_outbox(T0, limit=3, lease_seconds=60):
            got += [iid(i) for i in batch]
            await asyncio.sleep(0)
        return got

    results = await asyncio.gather(*(drain(s) for s in stores for _ in range(3)))
    claimed = [i for r in results for i in r]
    assert len(claimed) == len(set(claimed)) == 40
    assert all(i.attempts == 1 for i in await stores[1].outbox_items())


async def test_home_users_of_a_request_in_one_read(store: Store) -> None:
    request = make_request()
    now = request.created_at
    async with store.unit() as unit:
        await unit.insert_request(request)
        await unit.add_people(request.id, "approver", ["U1", "U2", "U3"], now)
        await unit.open_home("U1", now)
        await unit.open_home("U3", now)
        await unit.open_home("UDEC", now)
        await unit.open_home("UOTHER", now)
    async with store.unit() as unit:
        assert await unit.home_users_of(request.id) == {"U1", "U3"}
        assert await unit.home_users_of(request.id, ["UDEC", "UNOHOME"]) == {"U1", "U3", "UDEC"}
        assert await unit.home_users_of("apr_00000000000000000000000000", ["UDEC"]) == {"UDEC"}
