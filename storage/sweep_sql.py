"""The timer sweep's statements: claim due rows with the few columns the plan reads; reminders are written in
batches by each engine (storage/sqlite/writes.py, storage/postgres/writes.py).

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
    requests.c.escalate_at, requests.c.expires_at, requests.c.snoozed_until, requests.c.undo_until,
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
            snoozed_until=r[9], escalation=None), r[10])
        for r in rows
    ]


def time_of(dialect: sa.Dialect) -> Callable[[datetime | None], Any]:
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
