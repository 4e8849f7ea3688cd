"""Delivered outbox items' results on PostgreSQL in ONE statement (`SqlStore.outbox_finished`).

A group of deliveries that ended `Done` with nothing of their own to write (a card update, a Home
refresh) is their audit rows and their done marks. In a unit that was four round trips: BEGIN, the
audit INSERT, the done UPDATE, COMMIT. Here the INSERT is a data-modifying CTE and the UPDATE joins
a VALUES list of (id, done_at): one statement, which on the AUTOCOMMIT engine is a transaction of
its own, so the rows and the marks are written together or not at all, as in the unit.

Every value goes through its column's bind processor (storage/decided.TableInsert), and the text is
built once per shape (how many audit rows and marks), so asyncpg's prepared statements serve it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.model import AuditEvent
from storage.decided import TableInsert, placeholders, table_insert
from storage.schema import audit_events, outbox
from storage.values import audit_values

_SQL: dict[tuple[int, int, int], str] = {}  # by (id of the audit insert, audit rows, marks)


async def finish_in_one(conn: AsyncConnection, done: Sequence[tuple[int, datetime]],
                        audits: Sequence[AuditEvent]) -> None:
    """PostgreSQL: `audits` inserted and the items `done` (id, when) marked done, in one statement."""
    dialect = conn.dialect
    assert dialect.name == "postgresql"
    rows = [audit_values(e) for e in audits]
    marks = [{"id": item_id, "done_at": at} for item_id, at in done]
    if not rows and not marks:
        return
    params: list[Any] = []
    audit = table_insert(audit_events, rows[0], dialect) if rows else None
    if audit is not None:
        params.extend(v for row in rows for v in audit.values(row))
    if marks:
        mark = table_insert(outbox, marks[0], dialect)
        params.extend(v for row in marks for v in mark.values(row))
    key = (id(audit), len(rows), len(marks))  # table_insert keeps one TableInsert per column list
    statement = _SQL.get(key)
    if statement is None:
        statement = _SQL[key] = _statement(audit, len(rows), len(marks))
    await conn.exec_driver_sql(statement, tuple(params))


def _statement(audit: TableInsert | None, audits: int, marks: int) -> str:
    ctes, n = [], 1
    if audit is not None:  # the table and columns as the dialect quotes them (storage/decided.py)
        values = []
        for _ in range(audits):
            values.append(f"({placeholders(n, audit.width)})")
            n += audit.width
        ctes.append(f"a AS (INSERT INTO {audit.table} ({audit.columns}) VALUES {', '.join(values)})")
    if marks:
        values = [f"(${n + 2 * i}::bigint, ${n + 2 * i + 1}::timestamptz)" for i in range(marks)]
        ctes.append("d AS (UPDATE outbox SET status = 'done', done_at = x.done_at, lease_until = NULL "
                    f"FROM (VALUES {', '.join(values)}) AS x (id, done_at) WHERE outbox.id = x.id)")
    return f"WITH {', '.join(ctes)} SELECT 1"
