"""A new pending request (a card to post) written in the fewest statements.

A pending submit wrote its request row, its "created" audit row, its card's outbox item, one
request_people row per approver, read which approvers have opened App Home and enqueued a Home
refresh for each: 5 + one per person statements through SQLAlchemy Core, each a round trip on
PostgreSQL. Here, as storage/decided.py does for a request decided at submit:

- PostgreSQL: ONE statement. The inserts are data-modifying CTEs of a `SELECT 1`; the card and the
  Home refreshes are one INSERT ... SELECT over typed VALUES, keeping the card and those rows whose
  person is in home_users (read in the statement's own snapshot, as the separate read was in its own).
- SQLite: four driver-level statements on the unit's connection (requests, audit, outbox, people).

Invariant: the rows are exactly what `SqlUnit.insert_request`, `append_audit`, `enqueue` (a taken
dedupe_key skipped), `add_people` (a pair already indexed kept) and `home_users` + `enqueue` write:
the same value dicts from storage.sql, through the same bind processors (storage.decided._Insert);
the outbox items in the same order (the card first, then the Homes in the order given).
tests/storage/test_pending_rows.py compares the raw rows of both ways on both engines.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from storage.decided import table_insert, TableInsert, placeholders, sql_cast
from storage.schema import audit_events, outbox, request_people, requests

_PEOPLE_TAIL = " ON CONFLICT (request_id, user_id, role) DO NOTHING"
_SQL: dict[tuple[Any, ...], list[str]] = {}  # statements by engine and shape


async def insert_pending(conn: AsyncConnection, request: dict[str, Any], audit: dict[str, Any],
                         items: Sequence[tuple[str | None, dict[str, Any]]], people: Sequence[dict[str, Any]], *,
                         read: Any = None) -> tuple[Any, ...] | None:
    """Insert a request row, its audit row, its outbox items and its request_people rows (value dicts as
    storage.sql builds them). `items`: (user id, row) in order; a row with a user id is written only if
    that user is in home_users (a Home refresh), one without always (the card). Every outbox row and
    every people row is skipped if its key is taken. Raises IntegrityError (nothing written by it) when
    the request's idempotency key is taken. `read` (PostgreSQL only): a select without parameters, the
    statement's final SELECT instead of `SELECT 1`, read in the statement's snapshot; its row is returned."""
    dialect = conn.dialect
    parts = (table_insert(requests, request, dialect), table_insert(audit_events, audit, dialect),
             table_insert(outbox, items[0][1], dialect))
    person = table_insert(request_people, people[0], dialect) if people else None
    key = (id(dialect), *(id(p) for p in parts), id(person), len(items), len(people), id(read))
    statements = _SQL.get(key)
    if statements is None:
        statements = _SQL[key] = _statements(dialect, parts, tuple(items[0][1]), person, len(items), len(people),
                                             None if read is None else str(read.compile(dialect=dialect)))
    rq, au, ob = parts
    values = [rq.values(request), au.values(audit),
              [v for user, row in items for v in (*ob.values(row), user)],
              [v for row in people for v in person.values(row)] if person is not None else []]
    if dialect.name == "postgresql":
        result = await conn.exec_driver_sql(statements[0], tuple(v for part in values for v in part))
        return tuple(result.one()) if read is not None else None
    assert read is None, "SQLite: the caller reads on its own"
    # The unit's own sqlite3 connection inside its BEGIN IMMEDIATE, as storage/decided.py does.
    driver: Any = conn.sync_connection.connection.driver_connection  # type: ignore[union-attr]
    execute = driver._connection.execute
    for sql, params in zip(statements, values, strict=False):
        try:
            await driver._execute(execute, sql, params)
        except sqlite3.IntegrityError as exc:  # as SQLAlchemy reports it (a taken idempotency key)
            raise IntegrityError(sql, params, exc) from exc
    return None


def _statements(dialect: Dialect, parts: tuple[TableInsert, TableInsert, TableInsert], names: tuple[str, ...],
                person: TableInsert | None, items: int, people: int, read: str | None) -> list[str]:
    rq, au, ob = parts
    if dialect.name != "postgresql":
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
    casts = [sql_cast(outbox.c[n].type, dialect) for n in names]
    n = 1
    ctes = []
    for i, part in enumerate((rq, au)):
        ctes.append(f"w{i} AS (INSERT INTO {part.table} ({part.columns}) VALUES ({placeholders(n, part.width)}))")
        n += part.width
    typed_rows = []
    for order in range(items):
        typed = [f"${n + k}::{cast}" for k, cast in enumerate(casts)]
        typed_rows.append(f"({', '.join(typed)}, ${n + ob.width}::VARCHAR, {order})")
        n += ob.width + 1
    alias = ", ".join(f"c{k}" for k in range(ob.width))
    ctes.append(f"w2 AS (INSERT INTO {ob.table} ({ob.columns}) SELECT {alias} FROM (VALUES {', '.join(typed_rows)}) "
                f"AS v({alias}, u, o) WHERE u IS NULL OR u IN (SELECT user_id FROM home_users) ORDER BY o "
                "ON CONFLICT (dedupe_key) DO NOTHING)")
    if person is not None:
        values = []
        for _ in range(people):
            values.append(f"({placeholders(n, person.width)})")
            n += person.width
        ctes.append(f"w3 AS (INSERT INTO {person.table} ({person.columns}) VALUES {', '.join(values)}{_PEOPLE_TAIL})")
    return [f"WITH {', '.join(ctes)} {read or 'SELECT 1'}"]
