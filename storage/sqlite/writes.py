"""SQLite's writes of a request decided at submit, a pending request and a sweep's reminders: driver SQL on
the unit's own sqlite3 connection, inside its BEGIN IMMEDIATE (through the InlineConnection's `_execute`,
so a statement that meets another process's lock still waits on the worker thread), rendered once per
column list. SQLite has no round trips to save; SQLAlchemy's cost per statement (parameter compiling,
every column's bind processor) was most of these writes.

- decided at submit: three statements (one per table; every audit row in one);
- pending: four (requests, audit, outbox, people), the card and the Home refreshes of those who have
  opened App Home one INSERT ... SELECT over a VALUES list;
- reminders: one UPDATE ... FROM (VALUES ...) RETURNING and two executemany inserts.

Invariant: the rows are exactly what the reference unit's separate statements write (storage.base.Unit's
defaults); tests/storage/test_decided_rows.py, test_pending_rows.py and test_sweep_contract.py compare them.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from storage.base import Reminded
from storage.inserts import TableInsert, table_insert
from storage.schema import audit_events, decisions, outbox, request_people, requests
from storage.sqlite import driver as sqlite_driver
from storage.sweep_sql import time_of
from storage.shapes import Shapes

_PEOPLE_TAIL = " ON CONFLICT (request_id, user_id, role) DO NOTHING"
_PENDING: Shapes[tuple[Any, ...], list[str]] = Shapes()  # pending requests' statements by shape


async def _run(conn: AsyncConnection, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
    driver = sqlite_driver.aio(conn)
    for sql, values in statements:
        try:
            await sqlite_driver.execute(driver, sql, values)
        except sqlite3.IntegrityError as exc:  # as SQLAlchemy reports it (a taken idempotency key)
            raise IntegrityError(sql, values, exc) from exc


async def insert_decided(conn: AsyncConnection, request: dict[str, Any], decision: dict[str, Any],
                         audits: Sequence[dict[str, Any]]) -> None:
    """A request decided at submit: its row, its decision row and its audit rows (value dicts as
    storage/values.py builds them)."""
    dialect = conn.dialect
    parts = [table_insert(requests, request, dialect), table_insert(decisions, decision, dialect)]
    statements: list[tuple[str, Sequence[Any]]] = [
        (part.sql(1), part.values(row)) for part, row in zip(parts, (request, decision), strict=True)]
    if audits:
        audit = table_insert(audit_events, audits[0], dialect)
        statements.append((audit.sql(len(audits)), [v for row in audits for v in audit.values(row)]))
    await _run(conn, statements)


async def insert_pending(conn: AsyncConnection, request: dict[str, Any], audit: dict[str, Any],
                         items: Sequence[tuple[str | None, dict[str, Any]]], people: Sequence[dict[str, Any]]) -> None:
    """A new pending request: its row, its audit row, its outbox items ((user id, row) in order; a row
    with a user id is written only if that user is in home_users, one without always) and its
    request_people rows; every outbox and people row skipped if its key is taken. Raises
    IntegrityError when the request's idempotency key is taken (the unit is then rolled back)."""
    dialect = conn.dialect
    rq, au, ob = (table_insert(requests, request, dialect), table_insert(audit_events, audit, dialect),
                  table_insert(outbox, items[0][1], dialect))
    person = table_insert(request_people, people[0], dialect) if people else None
    key = (id(dialect), id(rq), id(au), id(ob), id(person), len(items), len(people))
    sql = _PENDING.get(key, lambda: _pending_statements(rq, au, ob, person, len(items), len(people)))
    values: list[Sequence[Any]] = [rq.values(request), au.values(audit),
                                   [v for user, row in items for v in (*ob.values(row), user)]]
    if person is not None:
        values.append([v for row in people for v in person.values(row)])
    await _run(conn, list(zip(sql, values, strict=True)))


def _pending_statements(rq: TableInsert, au: TableInsert, ob: TableInsert, person: TableInsert | None,
                        items: int, people: int) -> list[str]:
    # SQLite names a VALUES list's columns column1, column2...; its last two are the user and the order.
    width = ob.width
    rows = ", ".join(f"({', '.join('?' * (width + 1))}, {n})" for n in range(items))
    cols = ", ".join(f"column{n}" for n in range(1, width + 1))
    user, rank = f"column{width + 1}", f"column{width + 2}"
    out = [rq.sql(1), au.sql(1),
           f"INSERT INTO {ob.table} ({ob.columns}) SELECT {cols} FROM (VALUES {rows}) "
           f"WHERE {user} IS NULL OR {user} IN (SELECT user_id FROM home_users) ORDER BY {rank} "
           "ON CONFLICT (dedupe_key) DO NOTHING"]
    if person is not None:
        out.append(person.sql(people) + _PEOPLE_TAIL)
    return out


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


async def write_reminders(conn: AsyncConnection, reminders: Sequence[Reminded]) -> tuple[list[str], int]:
    """The reminders in three statements (see storage/sweep_sql.py): the ids written, in order, and the
    number of outbox items stored."""
    t = time_of(conn.dialect)
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
