"""SQLAlchemy implementation of the Store, for SQLite (aiosqlite, WAL) and PostgreSQL (asyncpg).

Dialect differences stay in small private helpers:
- SQLite allows one writer at a time. Write units take an in-process lock and
  open with `BEGIN IMMEDIATE`, so writers queue instead of failing with
  "database is locked" when a read lock would have to be upgraded; a wait for
  another process on the same file happens on aiosqlite's worker thread with a
  30 s busy timeout (statements themselves run on the loop: storage/sqlite/driver.py).
- PostgreSQL claims outbox rows with `FOR UPDATE SKIP LOCKED` and announces
  request changes with NOTIFY, which is delivered only if the unit commits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.domain.model import AuditEvent, Decision, Request, Status
from bot.domain.votes import Vote
from storage.sqlite import driver as sqlite_driver
from storage.base import (
    CardPosted,
    DueRow,
    DuplicateIdempotencyKey,
    Expect,
    Inbox,
    OutboxItem,
    Reminded,
    Store,
    Unit,
)
from storage import sweep_sql
from storage.inbox_sql import read_inbox
from storage.rows import (
    REQUEST_BY_ID,
    SELECT_REQUEST,
    driver_statement,
    mutable_columns,
    outbox_from_row,
    request_from_row,
)
from storage.schema import (
    audit_events,
    home_users,
    outbox,
    request_people,
    requests,
    votes,
)

from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite

from storage.postgres.decide import HOME_SENTINEL, decide_in_one
from storage.decided import insert_decided, insert_decision_rows
from storage.postgres.outbox import finish_statement, stored_cards
from storage.pending import insert_pending
from storage.postgres import fast as pg_fast
from storage.sqlite import fast as sqlite_fast
from storage.postgres.fast import driver_rows
from storage.postgres.lone_unit import lone_unit
from storage.sqlite.driver import busy
from storage import sql_statements as q
from storage.sql_statements import NOTIFY_CHANNEL, due_requests_statement
from storage.sqlite.engine import SqliteWriter, sqlite_engine
from storage.urls import async_url
from storage.values import audit_values, decision_values, outbox_values, request_values

if TYPE_CHECKING:
    from storage.postgres.raw import RawPool

U = TypeVar("U", bound="SqlUnit")


class SqlUnit(Unit):
    def __init__(self, conn: AsyncConnection) -> None:
        super().__init__()
        self.conn = conn
        self._postgres = conn.dialect.name == "postgresql"

    async def get_request(self, request_id: str) -> Request | None:
        if not self._postgres:  # the hottest read: driver SQL (storage/sqlite/fast.py)
            return await sqlite_fast.get_request(self.conn, request_id)
        row = (await self.conn.execute(REQUEST_BY_ID, {"request_id": request_id})).first()
        return request_from_row(row) if row else None

    async def find_by_idempotency_key(self, key: str) -> Request | None:
        stmt = SELECT_REQUEST.where(requests.c.idempotency_key == key)
        row = (await self.conn.execute(stmt)).first()
        return request_from_row(row) if row else None

    async def insert_request(self, request: Request) -> None:
        values = request_values(request)
        # No SAVEPOINT around it (two more statements per submit): a duplicate key ends the whole unit,
        # which rolls back, and the caller reads the key's holder in a fresh one (Service.submit).
        try:
            await self.conn.execute(q.INSERT_REQUEST, values)
        except IntegrityError as exc:
            if request.idempotency_key is not None:
                raise DuplicateIdempotencyKey(request.idempotency_key) from exc
            raise

    async def update_request(self, request: Request, *, expected_version: int) -> bool:
        cols = mutable_columns(request)
        if not self._postgres:
            return await sqlite_fast.update_request(self.conn, request.id, expected_version, cols)
        params = {"b_id": request.id, "b_expected": expected_version, "b_version": expected_version + 1,
                  **{f"b_{k}": v for k, v in cols.items()}}
        result = await self.conn.execute(q.update_requests_statement(tuple(cols)), params)
        return bool(result.rowcount == 1)

    async def insert_decision(self, request_id: str, decision: Decision) -> None:
        await self.conn.execute(q.INSERT_DECISION, decision_values(request_id, decision))

    async def insert_vote(self, request_id: str, vote: Vote) -> bool:
        """Store one approval; False (and nothing written) if this person already voted on it."""
        try:
            async with self.conn.begin_nested():
                await self.conn.execute(votes.insert().values(
                    request_id=request_id, voter_id=vote.voter.id, voter_name=vote.voter.name, at=vote.at))
        except IntegrityError:
            return False
        return True

    async def append_audit(self, event: AuditEvent) -> None:
        await self.append_audits((event,))

    async def insert_decided(self, request: Request, events: Sequence[AuditEvent]) -> None:
        assert request.decision is not None
        # Every column as the three inserts above write it, in one statement on PostgreSQL (with the NOTIFY).
        try:
            await insert_decided(self.conn, request_values(request), decision_values(request.id, request.decision),
                                 [audit_values(e) for e in events],
                                 notify=(NOTIFY_CHANNEL, request.id) if self._postgres else None)
        except IntegrityError as exc:  # as insert_request
            if request.idempotency_key is not None:
                raise DuplicateIdempotencyKey(request.idempotency_key) from exc
            raise

    async def insert_pending(self, request: Request, audit: AuditEvent, card: OutboxItem, people: Sequence[str],
                             homes: Sequence[tuple[str, OutboxItem]], *, expects: Sequence[Expect] = (),
                             final: bool = False) -> None:
        # One statement on PostgreSQL (the expected reads verified in it: storage/pending.py), four
        # driver-level ones on SQLite after reading each expected row.
        if not self._postgres:
            await self.verify(expects)
        now = request.created_at
        rows = [{"request_id": request.id, "user_id": user, "role": "approver", "added_at": now}
                for user in dict.fromkeys(people)]
        try:
            await insert_pending(
                self.conn, request_values(request), audit_values(audit),
                [(None, outbox_values(card)), *((user, outbox_values(i)) for user, i in homes)], rows,
                expects=expects if self._postgres else (), final=final)
        except IntegrityError as exc:  # as insert_request
            if request.idempotency_key is not None:
                raise DuplicateIdempotencyKey(request.idempotency_key) from exc
            raise
        self.enqueued += 1  # wakes the dispatcher (a dedupe_key already taken: it finds nothing)

    async def record_decision(self, request_id: str, decision: Decision, audit: AuditEvent,
                              items: Sequence[OutboxItem]) -> None:
        if not self._postgres:  # SQLite: no round trips to save, but SQLAlchemy's cost per statement
            self.enqueued += await sqlite_fast.record_decision(
                self.conn, decision_values(request_id, decision), audit_values(audit), [outbox_values(i) for i in items])
            return
        # The decision's rows, its outbox items and the NOTIFY in one statement: four round trips
        # were most of a decision's cost on PostgreSQL (each statement's `send` on loopback).
        await insert_decision_rows(self.conn, decision_values(request_id, decision), audit_values(audit),
                                   [outbox_values(i) for i in items], notify=(NOTIFY_CHANNEL, request_id))
        self.enqueued += len(items)  # wakes the dispatcher (a dedupe_key already taken: it finds nothing)

    async def decide_request(self, decided: Request, expected_version: int, audit: AuditEvent,
                             items: Sequence[OutboxItem], *, home: Callable[[str], OutboxItem],
                             decider: str | None = None, final: bool = False) -> bool:
        if self._postgres:
            assert decided.decision is not None
            # The guarded UPDATE, the App Home read and every insert in one statement: the read and the
            # UPDATE were two of the five round trips of a decision's unit (storage/postgres/decide.py).
            done = await decide_in_one(
                self.conn, decided.id, expected_version, mutable_columns(decided),
                decision_values(decided.id, decided.decision), audit_values(audit), [outbox_values(i) for i in items],
                outbox_values(home(HOME_SENTINEL)), decider, NOTIFY_CHANNEL, final=final)
            if done is not None:
                matched, stored = done
                self.enqueued += stored  # wakes the dispatcher on commit
                return matched
        return await super().decide_request(decided, expected_version, audit, items, home=home, decider=decider)

    async def enqueue(self, item: OutboxItem) -> bool:
        values = outbox_values(item)
        result = await self.conn.execute(q.ENQUEUE[self._postgres], values)
        stored = result.rowcount == 1
        self.enqueued += stored
        return stored

    def _insert_ignore(self, table: sa.Table, values: dict[str, Any], key: str) -> Any:
        return self._insert_ignore_keys(table, values, [key])

    async def outbox_done(self, item_id: int, now: datetime) -> None:
        await self.conn.execute(q.OUTBOX_DONE, {"b_id": item_id, "b_now": now})

    async def outbox_done_many(self, done: Sequence[tuple[int, datetime]]) -> None:
        if done and not self._postgres:  # SQLite: driver SQL, no SQLAlchemy call
            await sqlite_fast.outbox_done(self.conn, done)
        elif done:
            await self.conn.execute(q.OUTBOX_DONE, [{"b_id": item_id, "b_now": now} for item_id, now in done])

    async def outbox_retry(self, item_id: int, at: datetime, error: str, *, definite: bool) -> None:
        values: dict[str, Any] = {"next_attempt_at": at, "last_error": error[:2000], "lease_until": None}
        if definite:
            values["failures"] = outbox.c.failures + 1
        await self.conn.execute(outbox.update().where(outbox.c.id == item_id).values(**values))

    async def outbox_postpone(self, item_id: int, at: datetime) -> None:
        await self.conn.execute(outbox.update().where(outbox.c.id == item_id, outbox.c.attempts > 0).values(
            next_attempt_at=at, lease_until=None, attempts=outbox.c.attempts - 1))

    async def outbox_dead(self, item_id: int, now: datetime, error: str) -> None:
        await self.conn.execute(
            outbox.update()
            .where(outbox.c.id == item_id)
            .values(status="dead", done_at=now, last_error=error[:2000], lease_until=None)
        )

    async def notify(self, request_id: str) -> None:
        """Wake long-polls on this id (a request's or a run's) in other processes, once the unit commits."""
        if self._postgres:
            await self.conn.execute(q.NOTIFY, {"b_id": request_id})

    # -- timers and the App Home inbox ------------------------------------------

    async def claim_due_requests(self, now: datetime, *, limit: int) -> list[Request]:
        stmt = due_requests_statement(now, limit, postgres=self._postgres)
        return [request_from_row(row) for row in (await self.conn.execute(stmt)).all()]

    async def claim_due(self, now: datetime, *, limit: int) -> list[DueRow]:
        return await sweep_sql.claim_due(self.conn, now, limit)

    async def write_reminders(self, reminders: Sequence[Reminded]) -> list[str]:
        written, stored = await sweep_sql.write_reminders(self.conn, reminders)
        self.enqueued += stored
        return written

    async def add_people(self, request_id: str, role: str, user_ids: Iterable[str], now: datetime) -> None:
        rows = [{"request_id": request_id, "user_id": user_id, "role": role, "added_at": now}
                for user_id in dict.fromkeys(user_ids)]
        if rows:  # one multi-row INSERT, not one per person
            await self.conn.execute(q.ADD_PEOPLE[self._postgres].values(rows))

    async def remove_people(self, request_id: str, role: str, user_ids: Iterable[str]) -> None:
        ids = list(user_ids)
        if ids:
            await self.conn.execute(
                request_people.delete().where(
                    request_people.c.request_id == request_id,
                    request_people.c.role == role,
                    request_people.c.user_id.in_(ids),
                )
            )

    async def home_users(self, user_ids: Iterable[str]) -> set[str]:
        ids = list(dict.fromkeys(user_ids))
        if not ids:
            return set()
        stmt = sa.select(home_users.c.user_id).where(home_users.c.user_id.in_(ids))
        return set((await self.conn.execute(stmt)).scalars())

    async def home_users_of(self, request_id: str, also: Iterable[str] = ()) -> set[str]:
        extra = list(dict.fromkeys(also))
        if not self._postgres:
            return await sqlite_fast.home_users_of(self.conn, request_id, extra)
        stmt, params = (q.HOME_USERS_OF_AND, {"b_id": request_id, "b_also": extra}) if extra else \
            (q.HOME_USERS_OF, {"b_id": request_id})
        return set((await self.conn.execute(stmt, params)).scalars())

    async def open_home(self, user_id: str, now: datetime) -> None:
        values = {"user_id": user_id, "first_opened_at": now, "last_opened_at": now}
        if not await self._inserted(self._insert_ignore_keys(home_users, values, ["user_id"])):
            await self.conn.execute(
                home_users.update().where(home_users.c.user_id == user_id).values(last_opened_at=now)
            )

    async def set_card_permalink(self, request_id: str, permalink: str) -> None:
        await self.conn.execute(
            requests.update().where(requests.c.id == request_id).values(card_permalink=permalink)
        )

    async def update_requests(self, updates: Sequence[tuple[Request, int]]) -> int:
        if not updates:
            return 0
        rows = [(r.id, v, mutable_columns(r)) for r, v in updates]
        params = [{"b_id": rid, "b_expected": v, "b_version": v + 1, **{f"b_{k}": x for k, x in cols.items()}}
                  for rid, v, cols in rows]
        result = await self.conn.execute(q.update_requests_statement(tuple(rows[0][2])), params)
        # asyncpg reports no rowcount for executemany; its rows are locked by the caller's claim anyway.
        return int(result.rowcount) if result.rowcount >= 0 else len(updates)

    async def append_audits(self, events: Sequence[AuditEvent]) -> None:
        if events and not self._postgres:
            await sqlite_fast.insert_rows(self.conn, audit_events, [audit_values(e) for e in events])
        elif events:
            await self.conn.execute(q.INSERT_AUDIT, [audit_values(e) for e in events])

    async def enqueue_many(self, items: Sequence[OutboxItem]) -> None:
        if not items:
            return
        result = await self.conn.execute(q.ENQUEUE[self._postgres], [outbox_values(i) for i in items])
        self.enqueued += result.rowcount if result.rowcount >= 0 else len(items)  # only wakes the dispatcher

    async def store_card(self, request_id: str, channel: str, ts: str, now: datetime) -> bool:
        # One statement, no read: the guard is `card_ts IS NULL`, so a second post's ts never replaces it.
        params = {"rid": request_id, "b_channel": channel, "b_ts": ts, "b_now": now}
        if not self._postgres:
            return (await sqlite_fast.run(self.conn, q.STORE_CARD, params)).rowcount == 1
        return bool((await self.conn.execute(q.STORE_CARD, params)).rowcount == 1)

    async def _inserted(self, stmt: Any) -> bool:
        return (await self.conn.execute(stmt)).rowcount == 1

    def _insert_ignore_keys(self, table: sa.Table, values: dict[str, Any], keys: list[str]) -> Any:
        if self._postgres:
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(table).values(**values).on_conflict_do_nothing(index_elements=keys)
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table).values(**values).on_conflict_do_nothing(index_elements=keys)


class SqlStore(Store):
    """Store on SQLAlchemy. Create with `await SqlStore.open(database_url)`."""

    def __init__(self, engine: AsyncEngine, write_engine: AsyncEngine | None = None,
                 reader: sqlite_fast.Reader | None = None, raw: RawPool | None = None) -> None:
        self.engine = engine
        self.write_engine = write_engine or engine
        self.dialect = engine.dialect.name
        self.concurrent_writers = self.dialect == "postgresql"
        self._reader = reader  # SQLite: request reads without a pool checkout
        self._raw = raw  # PostgreSQL: the hottest statements on asyncpg's own pool (storage/postgres/raw.py)
        # SQLite: one writer per file; our own writers queue here, on one connection.
        self._writer = SqliteWriter(self.write_engine) if self.dialect == "sqlite" else None

    @classmethod
    async def open(cls, database_url: str, *, pool_size: int = 15) -> SqlStore:
        url = async_url(database_url)
        if url.get_backend_name() == "sqlite":
            read = sqlite_engine(database_url, begin=None)  # reads: one statement, one snapshot
            (filename,), _ = SQLiteDialect_aiosqlite().create_connect_args(url)
            reader = sqlite_fast.Reader(filename, read.dialect) if url.database not in (None, "", ":memory:") else None
            return cls(read, sqlite_engine(database_url, begin="BEGIN IMMEDIATE"), reader)
        from storage.postgres.raw import open_engines  # asyncpg: imported only where PostgreSQL is used

        reads, writes, raw = await open_engines(url, pool_size)
        return cls(reads, writes, raw=raw)

    def watch(self, seen: Callable[[str], None]) -> Callable[[], None]:
        """Call `seen(sql)` for every statement this store writes or reads through a pool (to count
        them): SQLAlchemy's (on SQLite, of the read engine), the raw pool's, and on SQLite the writer's
        own trace (its driver SQL too). Returns the call that stops it."""
        def before(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            seen(statement)

        engine = (self.engine if self._writer else self.write_engine).sync_engine
        sa.event.listen(engine, "before_cursor_execute", before)
        watchers = self._raw.watchers if self._raw else self._writer.watchers if self._writer else []
        watchers.append(seen)

        def stop() -> None:
            sa.event.remove(engine, "before_cursor_execute", before)
            watchers.remove(seen)
        return stop

    def unit(self) -> AbstractAsyncContextManager[SqlUnit]:
        return self.unit_of(SqlUnit)

    def lone_unit(self) -> AbstractAsyncContextManager[SqlUnit]:
        if self._writer is not None:  # SQLite: one writer, BEGIN IMMEDIATE
            return self.unit()
        return lone_unit(self.write_engine, self.engine, SqlUnit, self._finish_unit, self._raw)

    @asynccontextmanager
    async def unit_of(self, make: Callable[[AsyncConnection], U]) -> AsyncIterator[U]:
        """A unit of the class `make` builds (the run store's units extend the request store's)."""
        # The hooks run once the transaction committed and before the connection goes back to the pool:
        # that takes awaits, in which (PostgreSQL) this process's own NOTIFY would wake the unit's waiters
        # first, without the request it hands them, and each would read it back.
        async with self._writer.connection() if self._writer else self.write_engine.connect() as conn:
            async with conn.begin():
                unit = make(conn)
                yield unit
            self._finish_unit(unit)

    async def foreign_data_version(self) -> int:
        """SQLite: `PRAGMA data_version` on this process's writer connection. It changes only when
        ANOTHER connection commits, and this process's other connections only read: so it moves
        with other processes' commits, never with this process's own (which already woke their
        waiters). Read between this process's write units (behind the write lock, no transaction)."""
        assert self._writer is not None, "SQLite only"
        async with self._writer.connection() as conn:
            driver: Any = (await conn.get_raw_connection()).driver_connection
            # The sqlite3 connection itself: SQLAlchemy's execute would open a transaction (BEGIN IMMEDIATE).
            return int(sqlite_driver.sqlite3_of(driver).execute("PRAGMA data_version").fetchone()[0])

    async def get_request(self, request_id: str) -> Request | None:
        if self._reader is not None:
            try:
                return self._reader.get_request(request_id)
            except sqlite3.OperationalError as exc:  # it met a lock: read through the pool, which waits for it
                if not busy(exc):
                    raise
        if self._raw is not None:
            return await pg_fast.get_request(self._raw, self.engine, request_id)
        async with self.engine.connect() as conn:
            return await SqlUnit(conn).get_request(request_id)

    async def list_requests(
        self, *, status: Status | None, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[Request]:
        stmt = SELECT_REQUEST
        if status is not None:
            stmt = stmt.where(requests.c.status == status.value)
        if after is not None:
            # Typed binds: an untyped datetime skips UTCDateTime, and SQLite would compare a non-UTC
            # cursor as text in its own offset.
            cursor = sa.tuple_(
                sa.literal(after[0], requests.c.created_at.type), sa.literal(after[1], requests.c.id.type)
            )
            stmt = stmt.where(sa.tuple_(requests.c.created_at, requests.c.id) > cursor)
        stmt = stmt.order_by(requests.c.created_at, requests.c.id).limit(limit)
        async with self.engine.connect() as conn:
            return [request_from_row(r) for r in (await conn.execute(stmt)).all()]

    async def statuses(self, request_ids: Iterable[str]) -> dict[str, Status]:
        ids = list(request_ids)
        if not ids:
            return {}
        stmt = sa.select(requests.c.id, requests.c.status).where(requests.c.id.in_(ids))
        async with self.engine.connect() as conn:
            return {r.id: Status(r.status) for r in (await conn.execute(stmt)).all()}

    async def count_pending(self, owner: str) -> int:
        # On every submit that waits for a person: read as get_request reads (no pool checkout).
        if self._reader is not None:
            try:
                return int(self._reader.scalar(q.COUNT_PENDING_SQL["?"], (owner,)))
            except sqlite3.OperationalError as exc:  # it met a lock: read through the pool, which waits for it
                if not busy(exc):
                    raise
        if self._raw is not None:
            sql = q.COUNT_PENDING_SQL["$1"]

            async def again() -> Any:
                return (await driver_rows(self.engine, sql, (owner,)))[0]
            return int((await self._raw.fetchrow(sql, (owner,), again))[0])
        async with self.engine.connect() as conn:
            return int((await conn.execute(q.COUNT_PENDING, {"b_owner": owner})).scalar_one())

    async def audit_events(self, request_id: str) -> list[AuditEvent]:
        stmt = sa.select(audit_events).where(audit_events.c.request_id == request_id).order_by(audit_events.c.id)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(stmt)).all()
        return [AuditEvent(r.request_id, r.type, r.at, r.actor, r.data) for r in rows]

    async def claim_outbox(self, now: datetime, *, limit: int, lease_seconds: float) -> list[OutboxItem]:
        stmt = q.CLAIM_OUTBOX[self.dialect == "postgresql"]
        params = {"b_now": now, "b_limit": limit, "b_lease": now + timedelta(seconds=lease_seconds)}
        if self.dialect == "postgresql":  # one statement is its own transaction: no BEGIN and COMMIT round trips
            claim = driver_statement(stmt, self.engine.dialect)
            values = claim.params(params)
            again = partial(driver_rows, self.engine, claim.sql, values)
            rows: Sequence[Any] = [claim.mapped(r) for r in
                                   (await self._raw.fetch(claim.sql, values, again) if self._raw else await again())]
        else:  # SQLite: behind this process's write lock, in a BEGIN IMMEDIATE
            async with self.unit() as unit:
                rows = await sqlite_fast.mapped(unit.conn, stmt, params)
        return sorted((outbox_from_row(r) for r in rows), key=lambda i: i.id or 0)

    async def outbox_finished(self, done: Sequence[tuple[int, datetime]], audits: Sequence[AuditEvent],
                              cards: Sequence[tuple[CardPosted, datetime]] = ()) -> set[str]:
        if self._raw is None:
            return await super().outbox_finished(done, audits, cards)
        found = finish_statement(self.engine.dialect, done, audits, cards)
        if found is None:
            return set()
        # One statement, outside any transaction: a transaction of its own.
        return stored_cards(await self._raw.fetch(*found, partial(driver_rows, self.engine, *found)))

    async def next_outbox_due(self) -> datetime | None:
        """When the next pending item becomes claimable (an item in flight counts from its lease end)."""
        async with self.engine.connect() as conn:
            due_at: datetime | None = (await conn.execute(q.NEXT_OUTBOX_DUE)).scalar()
        return due_at

    async def outbox_items(self, request_id: str | None = None) -> list[OutboxItem]:
        stmt = sa.select(outbox).order_by(outbox.c.id)
        if request_id is not None:
            stmt = stmt.where(outbox.c.request_id == request_id)
        async with self.engine.connect() as conn:
            return [outbox_from_row(r) for r in (await conn.execute(stmt)).all()]

    async def inbox(self, user_id: str, *, limit: int, decided_since: datetime) -> Inbox:
        async with self.engine.connect() as conn:
            return await read_inbox(conn, user_id, limit=limit, decided_since=decided_since)

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        if self._writer is not None:
            await self._writer.close()
        if self._raw is not None:
            await self._raw.close()
        await self.engine.dispose()
        if self.write_engine is not self.engine:
            await self.write_engine.dispose()
