"""The timer sweep's statements: claim due rows with the few columns the plan reads, write reminders in batches.

A sweep round claims up to a batch of due rows and reminds most of them. Reading whole request
rows (every JSON column decoded) and writing every mutable column back was most of a sweep's
190-350 µs per due row; the plan needs the row's timing and its schedule, and a reminder changes
four columns (and the version). So:

- `claim_due`: id, version, the timing as text (parsed once per distinct timing: most requests
  share the server's defaults) and the scalar timer columns, oldest due first. PostgreSQL locks
  the rows it returns and skips rows another transaction holds (`FOR UPDATE SKIP LOCKED`), so
  replicas sweeping at once take different rows; on SQLite the unit is the one writer.
- `write_reminders`: each row's reminder columns under its own version guard (`version =
  expected`), and the audit event and outbox item of exactly the rows written. PostgreSQL: ONE
  statement per batch (arrays unnested; the update's RETURNING feeds both inserts). SQLite: one
  UPDATE ... FROM (VALUES ...) RETURNING and two executemany inserts, in the caller's unit.

Values are converted with the columns' own bind processors (UTC, SQLite's text form), so what is
stored is exactly what the generic writes store.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.timing import Timing
from storage.base import DueRow, Reminded
from bot.domain.json_codec import loads
from storage.rows import state_from_columns
from storage.schema import requests

_DUE_COLUMNS = (
    requests.c.id, requests.c.version, sa.cast(requests.c.timing, sa.Text).label("timing"),
    requests.c.reminders_sent, requests.c.remind_at, requests.c.escalation_loop, requests.c.escalation_level,
    requests.c.escalate_at, requests.c.expires_at, requests.c.snoozed_until,
)
_NOW = sa.bindparam("b_now", type_=requests.c.next_due_at.type)
_CLAIMS: dict[tuple[int, bool], Any] = {}


def claim_statement(limit: int, *, postgres: bool) -> Any:
    """The claim (bound parameter `b_now`), built once per batch size: a range scan on ix_requests_next_due_at."""
    stmt = _CLAIMS.get((limit, postgres))
    if stmt is None:
        stmt = (
            sa.select(*_DUE_COLUMNS)
            .where(requests.c.next_due_at <= _NOW, requests.c.status == "pending")
            .order_by(requests.c.next_due_at)
            .limit(limit)
        )
        if postgres:
            stmt = stmt.with_for_update(skip_locked=True)
        _CLAIMS[(limit, postgres)] = stmt
    return stmt


@lru_cache(maxsize=1024)
def _timing(text: str | None) -> Timing:
    """Timing is immutable, so requests with the same stored timing share one parsed value."""
    return Timing.from_json(loads(text)) if text else Timing()


async def claim_due(conn: AsyncConnection, now: datetime, limit: int) -> list[DueRow]:
    postgres = conn.dialect.name == "postgresql"
    rows = (await conn.execute(claim_statement(limit, postgres=postgres), {"b_now": now})).all()
    return [
        DueRow(r[0], r[1], _timing(r[2]), state_from_columns(
            reminders_sent=r[3], remind_at=r[4], loop=r[5], level=r[6], escalate_at=r[7], expires_at=r[8],
            snoozed_until=r[9], escalation=None))
        for r in rows
    ]


async def write_reminders(conn: AsyncConnection, reminders: Sequence[Reminded]) -> tuple[list[str], int]:
    """The ids written (in order) and the number of outbox items stored."""
    if not reminders:
        return [], 0
    if conn.dialect.name == "postgresql":
        return await _write_postgres(conn, reminders)
    return await _write_sqlite(conn, reminders)


def _time(dialect: sa.Dialect) -> Callable[[datetime | None], Any]:
    """UTCDateTime's conversion, for one batch: aware UTC (PostgreSQL), canonical naive-UTC text (SQLite).

    Through `dialect_impl`: the plain type's processor stops at a naive datetime, which sqlite3
    would store in its own text form (no microseconds when they are 0), not the one compared against.
    """
    process = requests.c.remind_at.type.dialect_impl(dialect).bind_processor(dialect)
    assert process is not None
    done: dict[datetime | None, Any] = {}

    def convert(value: datetime | None) -> Any:
        # A batch has few distinct times (its `now` is four of each row's six): convert each once.
        if value not in done:
            done[value] = process(value)
        return done[value]

    return convert


# Every row's guard is its own: `requests.version = v.expected`. A row whose version moved is not in
# `written`, so neither its audit event nor its outbox item is inserted. WITH ORDINALITY keeps the
# inserts in the batch's order (outbox ids order a request's effects).
_POSTGRES = """
WITH v AS (
    SELECT * FROM unnest($1::varchar[], $2::int[], $3::int[], $4::timestamptz[], $5::timestamptz[],
                         $6::timestamptz[]) AS v(id, expected, sent, remind_at, next_due_at, at)
), written AS (
    UPDATE requests SET version = requests.version + 1, reminders_sent = v.sent, remind_at = v.remind_at,
                        next_due_at = v.next_due_at, updated_at = v.at
    FROM v WHERE requests.id = v.id AND requests.version = v.expected
    RETURNING requests.id
), audits AS (
    INSERT INTO audit_events (request_id, type, actor, data, at)
    SELECT a.request_id, a.type, a.actor, a.data::json, a.at
    FROM unnest($7::varchar[], $8::varchar[], $9::varchar[], $10::text[], $11::timestamptz[])
         WITH ORDINALITY AS a(request_id, type, actor, data, at, n)
    WHERE a.request_id IN (SELECT id FROM written) ORDER BY a.n
), items AS (
    INSERT INTO outbox (request_id, kind, dedupe_key, payload, status, attempts, failures, next_attempt_at,
                        created_at)
    SELECT o.request_id, o.kind, o.dedupe_key, o.payload::json, 'pending', 0, 0, o.next_attempt_at, o.created_at
    FROM unnest($12::varchar[], $13::varchar[], $14::varchar[], $15::text[], $16::timestamptz[],
                $17::timestamptz[]) WITH ORDINALITY AS o(request_id, kind, dedupe_key, payload, next_attempt_at,
                                                        created_at, n)
    WHERE o.request_id IN (SELECT id FROM written) ORDER BY o.n
    ON CONFLICT (dedupe_key) DO NOTHING
    RETURNING 1
)
SELECT written.id, (SELECT count(*) FROM items) FROM written
"""


async def _write_postgres(conn: AsyncConnection, reminders: Sequence[Reminded]) -> tuple[list[str], int]:
    t = _time(conn.dialect)
    audits = [r.audit for r in reminders]
    items = [r.item for r in reminders]
    params = (
        [r.request_id for r in reminders], [r.expected_version for r in reminders],
        [r.reminders_sent for r in reminders], [t(r.remind_at) for r in reminders],
        [t(r.next_due_at) for r in reminders], [t(r.at) for r in reminders],
        [a.request_id for a in audits], [a.type for a in audits], [a.actor for a in audits],
        [json.dumps(a.data) for a in audits], [t(a.at) for a in audits],
        [i.request_id for i in items], [i.kind for i in items], [i.dedupe_key for i in items],
        [json.dumps(i.payload) for i in items], [t(i.next_attempt_at or i.created_at) for i in items],
        [t(i.created_at) for i in items],
    )
    rows: list[Any] = list((await conn.exec_driver_sql(_POSTGRES, params)).all())
    written = {r[0] for r in rows}
    return [r.request_id for r in reminders if r.request_id in written], int(rows[0][1]) if rows else 0


_SQLITE_UPDATE = (
    "UPDATE requests SET version = requests.version + 1, reminders_sent = v.column3, remind_at = v.column4,"
    " next_due_at = v.column5, updated_at = v.column6 FROM (VALUES {values}) AS v"
    " WHERE requests.id = v.column1 AND requests.version = v.column2 RETURNING requests.id"
)
_SQLITE_ROWS = 1000
_SQLITE_AUDIT = "INSERT INTO audit_events (request_id, type, actor, data, at) VALUES (?, ?, ?, ?, ?)"
_SQLITE_OUTBOX = (
    "INSERT INTO outbox (request_id, kind, dedupe_key, payload, status, attempts, failures, next_attempt_at,"
    " created_at) VALUES (?, ?, ?, ?, 'pending', 0, 0, ?, ?) ON CONFLICT (dedupe_key) DO NOTHING"
)


async def _write_sqlite(conn: AsyncConnection, reminders: Sequence[Reminded]) -> tuple[list[str], int]:
    t = _time(conn.dialect)
    written: set[str] = set()
    for start in range(0, len(reminders), _SQLITE_ROWS):  # SQLite allows 32,766 bound values per statement
        params: list[Any] = []
        for r in reminders[start:start + _SQLITE_ROWS]:
            params += (r.request_id, r.expected_version, r.reminders_sent, t(r.remind_at), t(r.next_due_at), t(r.at))
        update = _SQLITE_UPDATE.format(values=", ".join(["(?, ?, ?, ?, ?, ?)"] * (len(params) // 6)))
        written.update(row[0] for row in (await conn.exec_driver_sql(update, tuple(params))).all())
    done = [r for r in reminders if r.request_id in written]
    if not done:
        return [], 0
    await conn.exec_driver_sql(_SQLITE_AUDIT, [
        (r.audit.request_id, r.audit.type, r.audit.actor, json.dumps(r.audit.data), t(r.audit.at)) for r in done])
    result = await conn.exec_driver_sql(_SQLITE_OUTBOX, [
        (r.item.request_id, r.item.kind, r.item.dedupe_key, json.dumps(r.item.payload),
         t(r.item.next_attempt_at or r.item.created_at), t(r.item.created_at)) for r in done])
    return [r.request_id for r in done], max(result.rowcount, 0)
