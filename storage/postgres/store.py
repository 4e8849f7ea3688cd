"""The store on PostgreSQL: a change in as few round trips as it can, and NOTIFY for other processes.

- Every statement is a round trip, which on a loaded machine was the largest single cost (each
  `send` on loopback waits for a CPU). So a pending submit is one statement with its expected reads
  verified inside it (storage/postgres/writes.py), a person's decision one statement with its App Home read
  (storage/postgres/decide.py), a decided-at-submit request one (storage/postgres/writes.py).
- The hottest reads and single-statement units run on asyncpg's own pool (storage/postgres/raw.py),
  outside SQLAlchemy's async layer; a lone unit whose one statement is its last runs it as its own
  transaction (storage/postgres/lone_unit.py).
- The outbox is claimed with `FOR UPDATE SKIP LOCKED`; request changes are announced with NOTIFY,
  delivered only if the unit commits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.domain.model import AuditEvent, Decision, Request
from storage import sql_statements as q
from bot.domain.outbox import OutboxItem
from storage.base import CardPosted, Change, Expect, Reminded, T
from storage.postgres import writes
from storage.postgres import fast
from storage.postgres.decide import HOME_SENTINEL, decide_in_one
from storage.postgres.lone_unit import lone_unit
from storage.postgres.outbox import finish_statement, stored_cards
from storage.postgres.raw import RawPool, open_engines
from storage.rows import driver_statement, mutable_columns, outbox_from_row
from storage.sql import SqlStore, SqlUnit
from storage.sql_statements import NOTIFY_CHANNEL
from storage.urls import async_url
from storage.values import audit_values, decision_values, outbox_values, request_values


class PostgresUnit(SqlUnit):
    postgres = True

    def _notify_with(self, request_id: str) -> tuple[str, str] | None:
        return NOTIFY_CHANNEL, request_id

    async def insert_pending(self, request: Request, audit: AuditEvent, card: OutboxItem, people: Sequence[str],
                             homes: Sequence[tuple[str, OutboxItem]], *, expects: Sequence[Expect] = ()) -> None:
        # One statement, the expected reads verified in it (storage/postgres/writes.py); nothing follows it
        # in its change (Unit.insert_pending), so as a change's first statement it is the whole change.
        with self._keyed(request):
            await writes.insert_pending(self.conn, *self._pending_rows(request, audit, card, people, homes),
                                        expects=expects)
        self.enqueued += 1  # wakes the dispatcher (a dedupe_key already taken: it finds nothing)

    async def insert_decided(self, request: Request, events: Sequence[AuditEvent]) -> None:
        assert request.decision is not None
        with self._keyed(request):
            await writes.insert_decided(self.conn, request_values(request),
                                        decision_values(request.id, request.decision),
                                        [audit_values(e) for e in events], notify=(NOTIFY_CHANNEL, request.id))

    async def write_reminders(self, reminders: Sequence[Reminded]) -> list[str]:
        written, stored = await writes.write_reminders(self.conn, reminders)
        self.enqueued += stored
        return written

    async def record_decision(self, request_id: str, decision: Decision, audit: AuditEvent,
                              items: Sequence[OutboxItem]) -> None:
        # The decision's rows, its outbox items and the NOTIFY in one statement: four round trips
        # were most of a decision's cost (each statement's `send` on loopback).
        await writes.insert_decision_rows(self.conn, decision_values(request_id, decision), audit_values(audit),
                                   [outbox_values(i) for i in items], notify=(NOTIFY_CHANNEL, request_id))
        self.enqueued += len(items)  # wakes the dispatcher (a dedupe_key already taken: it finds nothing)

    async def decide_request(self, decided: Request, expected_version: int, audit: AuditEvent,
                             items: Sequence[OutboxItem], *, home: Callable[[str], OutboxItem],
                             decider: str | None = None, then: Change[None] | None = None) -> bool:
        assert decided.decision is not None
        # The guarded UPDATE, the App Home read and every insert in one statement: the read and the
        # UPDATE were two of the five round trips of a decision's unit (storage/postgres/decide.py).
        done = await decide_in_one(
            self.conn, decided.id, expected_version, mutable_columns(decided),
            decision_values(decided.id, decided.decision), audit_values(audit), [outbox_values(i) for i in items],
            outbox_values(home(HOME_SENTINEL)), decider, NOTIFY_CHANNEL, final=then is None)
        if done is None:
            return await super().decide_request(decided, expected_version, audit, items, home=home, decider=decider,
                                                then=then)
        matched, stored = done
        self.enqueued += stored  # wakes the dispatcher on commit
        if matched and then is not None:
            await then(self)
        return matched

    async def notify(self, request_id: str) -> None:
        await self.conn.execute(q.NOTIFY, {"b_id": request_id})

    def _insert_ignore_keys(self, table: sa.Table, values: dict[str, Any], keys: list[str]) -> Any:
        return pg_insert(table).values(**values).on_conflict_do_nothing(index_elements=keys)


_ADD_RECEIVED = """
WITH added AS (
  INSERT INTO slack_received (key, body, content_type, received_at, lease_until, attempts)
  SELECT k, b, c, $4, $5, 1 FROM unnest($1::varchar[], $2::text[], $3::varchar[]) AS given(k, b, c)
  ON CONFLICT (key) DO NOTHING
  RETURNING id, key
), marked AS (
  UPDATE slack_received SET done_at = $4 WHERE id = ANY($6::integer[])
)
SELECT id, key FROM added
"""


class PostgresStore(SqlStore):
    """The store on PostgreSQL. Open with `await storage.stores.open_store("postgresql://...")`."""

    unit_class = PostgresUnit
    concurrent_writers = True
    announces_changes = True

    def __init__(self, engine: AsyncEngine, write_engine: AsyncEngine, raw: RawPool) -> None:
        super().__init__(engine, write_engine)
        self._raw = raw  # the hottest statements on asyncpg's own pool
        # Reads that must agree: one REPEATABLE READ transaction holds one snapshot for all its statements.
        self._snapshots = write_engine.execution_options(isolation_level="REPEATABLE READ")

    @classmethod
    async def connect(cls, database_url: str, *, pool_size: int = 15) -> PostgresStore:
        reads, writes, raw = await open_engines(async_url(database_url), pool_size)
        return cls(reads, writes, raw)

    def _snapshot(self) -> AbstractAsyncContextManager[AsyncConnection]:
        return self._snapshots.begin()

    def _traced(self) -> list[Callable[[str], None]]:
        return self._raw.watchers  # the raw pool's statements

    @asynccontextmanager
    async def listen(self, on_change: Callable[[str], None]) -> AsyncIterator[asyncio.Event]:
        """LISTEN on a connection of its own; each NOTIFY's payload is the changed id."""
        closed = asyncio.Event()
        async with self.engine.connect() as conn:
            raw = (await conn.get_raw_connection()).driver_connection
            assert raw is not None

            def on_notify(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
                on_change(payload)

            raw.add_termination_listener(lambda _c: closed.set())
            await raw.add_listener(NOTIFY_CHANNEL, on_notify)
            try:
                yield closed
            finally:
                with contextlib.suppress(Exception):
                    await raw.remove_listener(NOTIFY_CHANNEL, on_notify)

    async def run_change(self, change: Change[T], *, shared: bool = False) -> T:
        # Transactions write side by side here: a change gains nothing by waiting for a group, and a
        # group of k is k + 2 round trips in a row (BEGIN, each change, COMMIT) where k lone units are
        # one round trip each, at the same time. `shared` changes too run each on their own.
        async with lone_unit(self.write_engine, self.engine, self.unit_class, self._finish_unit, self._raw) as unit:
            return await change(unit)

    async def get_request(self, request_id: str) -> Request | None:
        return await fast.get_request(self._raw, self.engine, request_id)

    async def count_pending(self, owner: str) -> int:
        sql = q.COUNT_PENDING_SQL["$1"]

        async def again() -> Any:
            return (await fast.driver_rows(self.engine, sql, (owner,)))[0]
        return int((await self._raw.fetchrow(sql, (owner,), again))[0])

    async def add_received(self, rows: Sequence[tuple[str, str, str]], now: datetime, lease_until: datetime,
                           done: Sequence[int]) -> list[tuple[int, str]]:
        """Slack's inputs `(key, body, content_type)` stored, and the handled rows `done` marked, in ONE
        statement (its own transaction: no BEGIN and COMMIT round trips, prepared once): the `(id, key)`
        of each input whose key was new. Every click's ack waits for this commit."""
        params = ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], now, lease_until, list(done))
        again = partial(fast.driver_rows, self.engine, _ADD_RECEIVED, params)
        return [(int(r[0]), str(r[1])) for r in await self._raw.fetch(_ADD_RECEIVED, params, again)]

    async def claim_outbox(self, now: datetime, *, limit: int, lease_seconds: float) -> list[OutboxItem]:
        # One statement is its own transaction: no BEGIN and COMMIT round trips.
        claim = driver_statement(q.CLAIM_OUTBOX[True], self.engine.dialect)
        values = claim.params({"b_now": now, "b_limit": limit, "b_lease": now + timedelta(seconds=lease_seconds)})
        again = partial(fast.driver_rows, self.engine, claim.sql, values)
        rows = [claim.mapped(r) for r in await self._raw.fetch(claim.sql, values, again)]
        return sorted((outbox_from_row(r) for r in rows), key=lambda i: i.id or 0)

    async def outbox_finished(self, done: Sequence[tuple[int, datetime]], audits: Sequence[AuditEvent],
                              cards: Sequence[tuple[CardPosted, datetime]] = ()) -> set[str]:
        found = finish_statement(self.engine.dialect, done, audits, cards)
        if found is None:
            return set()
        # One statement, outside any transaction: a transaction of its own.
        return stored_cards(await self._raw.fetch(*found, partial(fast.driver_rows, self.engine, *found)))

    async def close(self) -> None:
        await self._raw.close()
        await super().close()
