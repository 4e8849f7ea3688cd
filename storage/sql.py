"""The SQL store's engine-neutral part: what SQLite and PostgreSQL run alike, through SQLAlchemy Core.

One implementation per engine extends it, owning its fast paths: storage/sqlite/store.py (one writer
per file, statements on the event loop, driver SQL for the hottest ones) and storage/postgres/store.py
(the raw asyncpg pool, whole changes in one statement, NOTIFY). `storage.stores.open_store(url)` is
the one place that chooses between them. What this module does, it does through SQLAlchemy on either
engine; an engine's class adds what only it has (its INSERT ... ON CONFLICT, its outbox claim, its
way of seeing other processes' commits) and overrides a method only to make it faster, never to
change what it stores: the tests in tests/storage run every behaviour on both engines.

The reference implementation: storage.base.Unit's default methods (each change as the separate calls
it is made of) over this module's Core statements. Each engine's one-statement forms
(storage/<engine>/writes.py, storage/postgres/decide.py, the engines' fast.py) are compared against
it row for row (tests/storage/test_decided_rows.py, test_pending_rows.py, test_decide_rows.py,
test_sweep_contract.py, test_sqlite_fast.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from datetime import datetime
from typing import Any, ClassVar, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.domain.model import AuditEvent, Decision, Request, Status
from bot.domain.resumes import ResumeClaim, ResumeState
from bot.domain.stats import StatsRow
from bot.domain.votes import Vote
from storage import sql_statements as q
from storage import resume_sql, stats_sql, sweep_sql
from bot.domain.outbox import OutboxItem
from storage.base import AuditTail, DueRow, DuplicateIdempotencyKey, Expect, Inbox, Reminded, Store, Unit
from storage.inbox_sql import read_inbox
from storage.rows import REQUEST_BY_ID, SELECT_REQUEST, mutable_columns, outbox_from_row, request_from_row
from storage.schema import audit_events, home_users, outbox, request_people, requests, votes
from storage.sql_statements import due_requests_statement
from storage.values import audit_values, decision_values, outbox_values, request_values

U = TypeVar("U", bound="SqlUnit")
_KINDS: dict[tuple[type, type], type] = {}  # SqlStore.units_of


class SqlUnit(Unit):
    """A unit of work on one connection inside one transaction, every statement through SQLAlchemy."""

    postgres: ClassVar[bool] = False  # which form of a statement built for both engines this unit sends

    def __init__(self, conn: AsyncConnection) -> None:
        super().__init__()
        self.conn = conn

    async def get_request(self, request_id: str) -> Request | None:
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

    def _notify_with(self, request_id: str) -> tuple[str, str] | None:
        """The NOTIFY a statement that decides `request_id` carries (PostgreSQL); none here."""
        return None

    @contextmanager
    def _keyed(self, request: Request) -> Iterator[None]:
        """A write of `request`'s row: a taken idempotency key raises DuplicateIdempotencyKey (the unit is
        then to be rolled back), as insert_request does."""
        try:
            yield
        except IntegrityError as exc:
            if request.idempotency_key is not None:
                raise DuplicateIdempotencyKey(request.idempotency_key) from exc
            raise

    @staticmethod
    def _pending_rows(request: Request, audit: AuditEvent, card: OutboxItem, people: Sequence[str],
                      homes: Sequence[tuple[str, OutboxItem]]) -> tuple[Any, ...]:
        """insert_pending's value dicts, as the engines' one-statement forms take them: the request's,
        the audit row's, (user id or None, outbox row) in order (the card first), the people rows."""
        now = request.created_at
        rows = [{"request_id": request.id, "user_id": user, "role": "approver", "added_at": now}
                for user in dict.fromkeys(people)]
        items = [(None, outbox_values(card)), *((user, outbox_values(i)) for user, i in homes)]
        return request_values(request), audit_values(audit), items, rows

    async def enqueue(self, item: OutboxItem) -> bool:
        result = await self.conn.execute(q.ENQUEUE[self.postgres], outbox_values(item))
        stored = result.rowcount == 1
        self.enqueued += stored
        return stored

    def _insert_ignore(self, table: sa.Table, values: dict[str, Any], key: str) -> Any:
        return self._insert_ignore_keys(table, values, [key])

    async def outbox_done(self, item_id: int, now: datetime) -> None:
        await self.conn.execute(q.OUTBOX_DONE, {"b_id": item_id, "b_now": now})

    async def outbox_done_many(self, done: Sequence[tuple[int, datetime]]) -> None:
        if done:
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
        """Wake long-polls on this id (a request's or a run's) in other processes, once the unit commits:
        PostgreSQL's NOTIFY; on SQLite other processes watch the file instead (bot/live/waiters.py)."""

    # -- timers and the App Home inbox ------------------------------------------

    async def claim_due_requests(self, now: datetime, *, limit: int) -> list[Request]:
        stmt = due_requests_statement(now, limit, postgres=self.postgres)
        return [request_from_row(row) for row in (await self.conn.execute(stmt)).all()]

    async def claim_due(self, now: datetime, *, limit: int) -> list[DueRow]:
        return await sweep_sql.claim_due(self.conn, now, limit)

    async def write_reminders(self, reminders: Sequence[Reminded]) -> list[str]:
        """The reference form, one guarded UPDATE per row through SQLAlchemy Core; each engine writes a
        batch in one to three statements instead (storage/sqlite/writes.py, storage/postgres/writes.py)."""
        names = ("reminders_sent", "remind_at", "next_due_at", "updated_at")
        written = []
        for r in reminders:
            params = {"b_id": r.request_id, "b_expected": r.expected_version, "b_version": r.expected_version + 1,
                      "b_reminders_sent": r.reminders_sent, "b_remind_at": r.remind_at,
                      "b_next_due_at": r.next_due_at, "b_updated_at": r.at}
            if (await self.conn.execute(q.update_requests_statement(names), params)).rowcount == 1:
                await self.append_audit(r.audit)
                await self.enqueue(r.item)
                written.append(r.request_id)
        return written

    async def add_people(self, request_id: str, role: str, user_ids: Iterable[str], now: datetime) -> None:
        rows = [{"request_id": request_id, "user_id": user_id, "role": role, "added_at": now}
                for user_id in dict.fromkeys(user_ids)]
        if rows:  # one multi-row INSERT, not one per person
            await self.conn.execute(q.ADD_PEOPLE[self.postgres].values(rows))

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
        if events:
            await self.conn.execute(q.INSERT_AUDIT, [audit_values(e) for e in events])

    async def enqueue_many(self, items: Sequence[OutboxItem]) -> None:
        if not items:
            return
        result = await self.conn.execute(q.ENQUEUE[self.postgres], [outbox_values(i) for i in items])
        self.enqueued += result.rowcount if result.rowcount >= 0 else len(items)  # only wakes the dispatcher

    async def store_card(self, request_id: str, channel: str, ts: str, now: datetime) -> bool:
        # One statement, no read: the guard is `card_ts IS NULL`, so a second post's ts never replaces it.
        params = {"rid": request_id, "b_channel": channel, "b_ts": ts, "b_now": now}
        return bool((await self.conn.execute(q.STORE_CARD, params)).rowcount == 1)

    async def _inserted(self, stmt: Any) -> bool:
        return (await self.conn.execute(stmt)).rowcount == 1

    def _insert_ignore_keys(self, table: sa.Table, values: dict[str, Any], keys: list[str]) -> Any:
        """INSERT ... ON CONFLICT (keys) DO NOTHING, in the engine's own dialect."""
        raise NotImplementedError


class _SqlAuditTail(AuditTail):
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def last_id(self) -> int:
        value = (await self._conn.execute(sa.select(sa.func.max(audit_events.c.id)))).scalar()
        await self._conn.rollback()  # end the read transaction: the next read must see newer commits
        return int(value or 0)

    async def since(self, seen: int, limit: int) -> list[tuple[int, str]]:
        rows = (await self._conn.execute(
            sa.select(audit_events.c.id, audit_events.c.request_id)
            .where(audit_events.c.id > seen).order_by(audit_events.c.id).limit(limit)
        )).all()
        await self._conn.rollback()
        return [(int(row.id), str(row.request_id)) for row in rows]


class SqlStore(Store):
    """The store on SQLAlchemy. Open with `await storage.stores.open_store(database_url)`, which returns
    the engine's own implementation (storage/sqlite/store.py or storage/postgres/store.py)."""

    unit_class: type[SqlUnit] = SqlUnit

    def __init__(self, engine: AsyncEngine, write_engine: AsyncEngine | None = None) -> None:
        self.engine = engine  # reads
        self.write_engine = write_engine or engine  # units
        self.dialect = engine.dialect.name

    def watch(self, seen: Callable[[str], None]) -> Callable[[], None]:
        """Call `seen(sql)` for every statement this store sends (to count them): SQLAlchemy's on
        `_watched_engine`, and the driver-level statements the engine's own trace sees. Returns the
        call that stops it."""
        def before(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            seen(statement)

        engine = self._watched_engine().sync_engine
        sa.event.listen(engine, "before_cursor_execute", before)
        traced = self._traced()
        traced.append(seen)

        def stop() -> None:
            sa.event.remove(engine, "before_cursor_execute", before)
            traced.remove(seen)
        return stop

    def _watched_engine(self) -> AsyncEngine:
        """The engine whose SQLAlchemy statements `watch` sees."""
        return self.write_engine

    def _traced(self) -> list[Callable[[str], None]]:
        """Who is told of the statements sent outside SQLAlchemy (the engine's own trace)."""
        return []

    def unit(self) -> AbstractAsyncContextManager[SqlUnit]:
        return self.unit_of(self.unit_class)

    def units_of(self, kind: type[U]) -> type[U]:
        """`kind` (a unit class extending SqlUnit: the run store's) on this engine's unit, made once."""
        key = (kind, self.unit_class)
        made = _KINDS.get(key)
        if made is None:
            made = _KINDS[key] = type(f"{self.unit_class.__name__}{kind.__name__}", (kind, self.unit_class), {})
        return made

    @asynccontextmanager
    async def unit_of(self, make: Callable[[AsyncConnection], U]) -> AsyncIterator[U]:
        """A unit of the class `make` builds (the run store's units extend the request store's)."""
        # The hooks run once the transaction committed and before the connection goes back to the pool:
        # that takes awaits, in which (PostgreSQL) this process's own NOTIFY would wake the unit's waiters
        # first, without the request it hands them, and each would read it back.
        async with self._unit_connection() as conn:
            async with conn.begin():
                unit = make(conn)
                yield unit
            self._finish_unit(unit)

    def _unit_connection(self) -> AbstractAsyncContextManager[AsyncConnection]:
        return self.write_engine.connect()

    @asynccontextmanager
    async def audit_tail(self) -> AsyncIterator[AuditTail]:
        async with self.engine.connect() as conn:
            yield _SqlAuditTail(conn)

    async def get_request(self, request_id: str) -> Request | None:
        async with self.engine.connect() as conn:
            return await self.unit_class(conn).get_request(request_id)

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

    async def approved_of_tool(self, tool: str, *, since: datetime, limit: int) -> list[Request]:
        # Walks ix_requests_status_created backwards from now to `since`: bounded by the window.
        stmt = SELECT_REQUEST.where(
            requests.c.status == Status.APPROVED.value, requests.c.action_name == tool,
            requests.c.created_at >= sa.literal(since, requests.c.created_at.type),
        ).order_by(requests.c.created_at.desc(), requests.c.id.desc()).limit(limit)
        async with self.engine.connect() as conn:
            return [request_from_row(r) for r in (await conn.execute(stmt)).all()]

    async def pending_approval_by_card(self, channel: str, ts: str) -> Request | None:
        stmt = SELECT_REQUEST.where(
            requests.c.status == Status.PENDING.value, requests.c.kind == "approval",
            requests.c.card_channel == channel, requests.c.card_ts == ts,
        ).limit(1)
        async with self.engine.connect() as conn:
            row = (await conn.execute(stmt)).first()
        return request_from_row(row) if row is not None else None

    async def statuses(self, request_ids: Iterable[str]) -> dict[str, Status]:
        ids = list(request_ids)
        if not ids:
            return {}
        stmt = sa.select(requests.c.id, requests.c.status).where(requests.c.id.in_(ids))
        async with self.engine.connect() as conn:
            return {r.id: Status(r.status) for r in (await conn.execute(stmt)).all()}

    async def add_received(self, rows: Sequence[tuple[str, str, str]], now: datetime, lease_until: datetime,
                           done: Sequence[int]) -> list[tuple[int, str]]:
        """Slack's inputs `(key, body, content_type)` stored and the handled rows `done` marked, committed
        together: the `(id, key)` of each input whose key was new (storage/received.py). Each engine's
        store writes them its cheapest way."""
        raise NotImplementedError

    async def count_pending(self, owner: str) -> int:
        async with self.engine.connect() as conn:
            return int((await conn.execute(q.COUNT_PENDING, {"b_owner": owner})).scalar_one())

    async def audit_events(self, request_id: str) -> list[AuditEvent]:
        stmt = sa.select(audit_events).where(audit_events.c.request_id == request_id).order_by(audit_events.c.id)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(stmt)).all()
        return [AuditEvent(r.request_id, r.type, r.at, r.actor, r.data) for r in rows]

    async def claim_outbox(self, now: datetime, *, limit: int, lease_seconds: float) -> list[OutboxItem]:
        raise NotImplementedError

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
        # Six reads (three pages, three totals) that must agree: read one by one, a request committed
        # between a page and its total showed as "(1)" over an empty list ("… 1 more request").
        async with self._snapshot() as conn:
            return await read_inbox(conn, user_id, limit=limit, decided_since=decided_since)

    def _snapshot(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection whose reads all see one moment (the engine's own way to hold a snapshot)."""
        return self.engine.begin()

    async def stats_rows(self, since: datetime, until: datetime, channel: str | None, *,
                         cap: int) -> tuple[list[StatsRow], bool]:
        async with self.engine.connect() as conn:
            return await stats_sql.read_stats(conn, since, until, channel, cap)

    async def stats_channels(self, since: datetime, until: datetime, *, cap: int) -> list[str]:
        async with self.engine.connect() as conn:
            return await stats_sql.channels_with_requests(conn, since, until, cap)

    async def mark_viewed(self, request_ids: Sequence[str], at: datetime) -> list[StatsRow]:
        async with self.unit() as unit:  # the engine's own writer (SQLite: the one write lock)
            assert isinstance(unit, SqlUnit)
            return await stats_sql.mark_viewed(unit.conn, request_ids, at)

    async def claim_resume(self, wanted: ResumeClaim, now: datetime) -> tuple[bool, ResumeClaim]:
        async with self.unit() as unit:
            return await resume_sql.claim(unit, wanted, now)

    async def renew_resume(self, token: str, key: str, owner: str, until: datetime,
                           now: datetime) -> tuple[bool, ResumeClaim | None]:
        async with self.unit() as unit:
            return await resume_sql.renew(unit, token, key, owner, until, now)

    async def finish_resume(self, token: str, key: str, owner: str, state: ResumeState, error: str | None,
                            now: datetime) -> tuple[bool, ResumeClaim | None]:
        async with self.unit() as unit:
            return await resume_sql.finish(unit, token, key, owner, state, error, now)

    async def get_resume(self, token: str, key: str) -> ResumeClaim | None:
        async with self.engine.connect() as conn:
            return await resume_sql.get(conn, token, key)

    async def close(self) -> None:
        await self.engine.dispose()
        if self.write_engine is not self.engine:
            await self.write_engine.dispose()
