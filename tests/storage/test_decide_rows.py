"""`Unit.decide_request` (one statement on PostgreSQL, storage/postgres/decide.py) writes exactly what the
generic sequence writes (guarded update, App Home read, decision rows): the raw rows of both ways,
every column as the database holds it, are the same; a lost guard writes nothing at all."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from functools import partial
from typing import Any

import asyncpg
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from bot.outbox import effects
from bot.domain.model import Actor, AuditEvent, Decision, Outcome, Request, Status, Via
from bot.domain.outbox import OutboxItem
from storage.base import Unit
from storage.schema import outbox
from storage.postgres.decide import HOME_SENTINEL, home_forms
from storage.sql import SqlStore
from storage.stores import open_store
from storage.sql_statements import NOTIFY_CHANNEL
from storage.values import outbox_values
from tests.storage.test_contract import T0, full_request
from tests.storage.test_decided_rows import rows

T1 = T0 + timedelta(seconds=5)
HOMES = ["U1", "U3", "UDEC", "UOTHER"]  # App Home users: two approvers, the decider, someone unrelated


def pending(request_id: str) -> Request:
    base = full_request()
    return base.evolve(id=request_id, idempotency_key=None, status=Status.PENDING, decision=None)


def decision_of(request: Request, decider: str) -> tuple[Request, AuditEvent, tuple[OutboxItem, ...]]:
    """What Service.decide writes for an approval of `request` by `decider`."""
    decision = Decision(outcome=Outcome.APPROVED, params={**request.action.params, "n": 10**20}, changes=(),
                        comment="fine ✓ «ok»", decided_by=Actor(decider, "Dée"), decided_at=T1, via=Via.BUTTON,
                        params_sha256="e" * 64)
    decided = request.evolve(status=Status.APPROVED, decision=decision, updated_at=T1, next_due_at=None,
                             extra={**request.extra, "suggestion": {"é": [1, 2.5, None]}})
    audit = AuditEvent(request.id, "decided", T1, decider, {"outcome": "approved", "via": "button", "changes": []})
    items = (effects.update_card(request.id, f"card:{request.id}:decided", T1),
             effects.webhook(request.id, f"webhook:{request.id}:decided", T1, url="https://x.example/h",
                             body={"type": "approval.decided", "é": [1, 2.5, None]}))
    return decided, audit, items


def home(request_id: str) -> Any:
    return partial(effects.publish_home, key=f"{request_id}:decided", now=T1)


async def outbox_of(store: SqlStore, request_id: str) -> list[Any]:
    """The request's outbox rows and its App Home items (keyed by it), every column as text, ids left out."""
    async with store.engine.connect() as conn:
        cols = [sa.cast(c, sa.Text).label(c.name) for c in outbox.c if c.name != "id"]
        mine = sa.or_(outbox.c.request_id == request_id, outbox.c.dedupe_key.like(f"home:%:{request_id}:decided"))
        found = await conn.execute(sa.select(*cols).where(mine).order_by(outbox.c.id))
        return [tuple(r) for r in found.all()]


async def setup(store: SqlStore, request_ids: list[str]) -> None:
    async with store.unit() as unit:
        for user in HOMES:
            await unit.open_home(user, T0)
        for request_id in request_ids:
            await unit.insert_request(pending(request_id))
            await unit.add_people(request_id, "approver", ["U3", "U1", "U2"], T0)
            # U3's refresh of this decision is already queued: its dedupe_key is taken, so it is skipped.
            await unit.enqueue(effects.publish_home("U3", f"{request_id}:decided", T0))


def comparable(text: str, request_id: str) -> str:
    return text.replace(request_id, "X")


async def test_a_decision_writes_what_the_sequence_writes(db_url: str) -> None:
    store = await open_store(db_url)
    try:
        ways = {"generic": ["apr_generic_a", "apr_generic_b"], "one": ["apr_one_a", "apr_one_b"]}
        await setup(store, [r for ids in ways.values() for r in ids])
        sent: list[str] = []
        sa.event.listen(store.write_engine.sync_engine, "before_cursor_execute",
                        lambda _c, _cur, statement, *_a: sent.append(statement))
        for way, ids in ways.items():
            sent.clear()
            async with store.unit() as unit:  # two decisions in one unit, as group commit does
                for request_id in ids:
                    decided, audit, items = decision_of(pending(request_id), "UDEC")
                    decide = Unit.decide_request if way == "generic" else type(unit).decide_request
                    assert await decide(unit, decided, decided.version, audit, items, home=home(request_id),
                                        decider="UDEC")
                assert unit.enqueued >= 2 * 4  # card, webhook, U1's and the decider's Homes: wakes the dispatcher
            if way == "generic" and store.dialect == "postgresql":  # SQLite sends driver SQL (sqlite_fast)
                assert len(sent) >= 2 * 3  # the update, the home read, the decision rows: counted here too
            if way == "one" and store.dialect == "postgresql":
                assert len(sent) == 2, sent  # one statement per decision
        written = {}
        for way, ids in ways.items():
            for request_id in ids:
                queued = await outbox_of(store, request_id)
                kinds = [(r[1], r[2]) for r in queued]
                assert kinds == [("slack.publish_home", f"home:U3:{request_id}:decided"),  # the one queued before
                                 ("slack.update_card", f"card:{request_id}:decided"),
                                 ("webhook", f"webhook:{request_id}:decided"),
                                 ("slack.publish_home", f"home:U1:{request_id}:decided"),
                                 ("slack.publish_home", f"home:UDEC:{request_id}:decided")]
                assert queued[3][3] == '{"user": "U1"}'
                written[request_id] = comparable(str(await rows(store, request_id)) + str(queued), request_id)
            got = await store.get_request(ids[0])
            assert got is not None and got.status is Status.APPROVED and got.version == 2
        assert written["apr_one_a"] == written["apr_generic_a"]
        assert written["apr_one_b"] == written["apr_generic_b"]
    finally:
        await store.close()


async def test_a_lost_guard_writes_nothing(db_url: str) -> None:
    store = await open_store(db_url)
    listener = None
    try:
        await setup(store, ["apr_lost", "apr_won"])
        before = str(await rows(store, "apr_lost")) + str(await outbox_of(store, "apr_lost"))
        heard: asyncio.Queue[str] = asyncio.Queue()
        if store.dialect == "postgresql":
            listener = await asyncpg.connect(make_url(db_url).set(drivername="postgresql")
                                             .render_as_string(hide_password=False))
            await listener.add_listener(NOTIFY_CHANNEL, lambda *args: heard.put_nowait(args[3]))
        async with store.unit() as unit:  # the unit commits: only the guard keeps the decision out
            decided, audit, items = decision_of(pending("apr_lost"), "UDEC")
            assert not await unit.decide_request(decided, decided.version + 1, audit, items,
                                                 home=home("apr_lost"), decider="UDEC")
            assert unit.enqueued == 0
        assert str(await rows(store, "apr_lost")) + str(await outbox_of(store, "apr_lost")) == before
        async with store.unit() as unit:
            decided, audit, items = decision_of(pending("apr_won"), "UDEC")
            assert await unit.decide_request(decided, decided.version, audit, items, home=home("apr_won"),
                                             decider="UDEC")
        if listener is not None:  # notifications arrive in commit order: the lost one sent none
            assert await asyncio.wait_for(heard.get(), 10) == "apr_won"
    finally:
        if listener is not None:
            await listener.close()
        await store.close()


async def test_a_home_item_sql_cannot_build_takes_the_sequence(db_url: str) -> None:
    """A home item using the user id twice is not expressible as one splice: written the generic way."""
    store = await open_store(db_url)
    try:
        await setup(store, ["apr_odd_home"])

        def odd(user: str) -> OutboxItem:
            return OutboxItem.due("slack.publish_home", f"home:{user}:{user}:apr_odd_home:decided", T1,
                                  ordered_by=None, payload={"user": user})

        async with store.unit() as unit:
            decided, audit, items = decision_of(pending("apr_odd_home"), "UDEC")
            assert await unit.decide_request(decided, decided.version, audit, items, home=odd, decider=None)
        assert home_forms(outbox_values(odd(HOME_SENTINEL)), store.engine.dialect) is None
        assert [r[2] for r in await outbox_of(store, "apr_odd_home")] == [
            "home:U3:apr_odd_home:decided", "card:apr_odd_home:decided", "webhook:apr_odd_home:decided",
            "home:U1:U1:apr_odd_home:decided", "home:U3:U3:apr_odd_home:decided"]
    finally:
        await store.close()
