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

import re
import sqlite3
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from storage.sqlite import driver as sqlite_driver
from storage.base import Expect, StaleRead
from storage.decided import column_casts, placeholders, table_insert, TableInsert, typed_placeholders
from storage.postgres.lone_unit import Deferred
from storage.schema import audit_events, outbox, request_people, requests

_PEOPLE_TAIL = " ON CONFLICT (request_id, user_id, role) DO NOTHING"
_SQL: dict[tuple[Any, ...], list[str]] = {}  # statements by engine and shape
DIVISION_BY_ZERO = "22012"  # the SQLSTATE of the final SELECT that found a read moved (see insert_pending)


async def insert_pending(conn: AsyncConnection, request: dict[str, Any], audit: dict[str, Any],
                         items: Sequence[tuple[str | None, dict[str, Any]]], people: Sequence[dict[str, Any]], *,
                         expects: Sequence[Expect] = (), final: bool = False) -> None:
    """Insert a request row, its audit row, its outbox items and its request_people rows (value dicts as
    storage.sql builds them). `items`: (user id, row) in order; a row with a user id is written only if
    that user is in home_users (a Home refresh), one without always (the card). Every outbox row and
    every people row is skipped if its key is taken. Raises IntegrityError (nothing written by it) when
    the request's idempotency key is taken.

    `expects` (PostgreSQL only; SQLite's caller reads them itself): reads the caller relied on, verified
    in the statement's own snapshot by its final SELECT, which divides by zero when one of them no
    longer holds, so the statement fails and writes nothing: StaleRead is raised. With nothing else
    to verify, a statement that fails can be the whole unit: `final` in a lone unit (storage/postgres/lone_unit.py)
    runs it as a transaction of its own."""
    dialect = conn.dialect
    parts = (table_insert(requests, request, dialect), table_insert(audit_events, audit, dialect),
             table_insert(outbox, items[0][1], dialect))
    person = table_insert(request_people, people[0], dialect) if people else None
    key = (id(dialect), *(id(p) for p in parts), id(person), len(items), len(people),
           *(id(e.statement) for e in expects))
    statements = _SQL.get(key)
    if statements is None:
        statements = _SQL[key] = _statements(dialect, parts, tuple(items[0][1]), person, len(items), len(people),
                                             expects)
    rq, au, ob = parts
    values = [rq.values(request), au.values(audit),
              [v for user, row in items for v in (*ob.values(row), user)],
              [v for row in people for v in person.values(row)] if person is not None else [],
              [v for e in expects for v in e.params], [v for e in expects for v in e.value]]
    if dialect.name == "postgresql":
        flat = tuple(v for part in values for v in part)
        try:
            if final and isinstance(conn, Deferred):
                await conn.sole(statements[0], flat)
            else:
                await conn.exec_driver_sql(statements[0], flat)
        except DBAPIError as exc:
            if expects and getattr(exc.orig, "sqlstate", None) == DIVISION_BY_ZERO:  # only the final SELECT divides
                raise StaleRead(tuple(e.value for e in expects)) from None
            raise
        return
    assert not expects, "SQLite: the caller reads on its own"
    # The unit's own sqlite3 connection inside its BEGIN IMMEDIATE, as storage/decided.py does.
    driver = sqlite_driver.aio(conn)
    for sql, params in zip(statements, values, strict=False):
        try:
            await sqlite_driver.execute(driver, sql, params)
        except sqlite3.IntegrityError as exc:  # as SQLAlchemy reports it (a taken idempotency key)
            raise IntegrityError(sql, params, exc) from exc
    return None


def _statements(dialect: Dialect, parts: tuple[TableInsert, TableInsert, TableInsert], names: tuple[str, ...],
                person: TableInsert | None, items: int, people: int, expects: Sequence[Expect]) -> list[str]:
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
    casts = column_casts(outbox, names, dialect)
    n = 1
    ctes = []
    for i, part in enumerate((rq, au)):
        ctes.append(f"w{i} AS (INSERT INTO {part.table} ({part.columns}) VALUES ({placeholders(n, part.width)}))")
        n += part.width
    typed_rows = []
    for order in range(items):
        typed_rows.append(f"({typed_placeholders(n, casts)}, ${n + ob.width}::VARCHAR, {order})")
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
    return [f"WITH {', '.join(ctes)} {_verify(dialect, expects, n) if expects else 'SELECT 1'}"]


def _verify(dialect: Dialect, expects: Sequence[Expect], n: int) -> str:
    """The final SELECT: 1, or a division by zero if a read (in the statement's snapshot) is not the row
    its caller saw. Each read's own parameters come first (numbered from `n`), then every expected
    value; `IS NOT DISTINCT FROM` counts a NULL (the max of no rows) equal to None."""
    sources: list[str] = []
    columns: list[str] = []
    for k, expect in enumerate(expects):
        sql = str(expect.statement.compile(dialect=dialect))
        sql = re.sub(r"\$(\d+)", lambda m: f"${int(m.group(1)) + n - 1}", sql)  # its parameters after ours
        n += len(expect.params)
        width = len(expect.statement.selected_columns)
        names = [f"c{i}" for i in range(width)]
        sources.append(f"({sql}) AS e{k} ({', '.join(names)})")
        columns.extend(f"e{k}.{name}" for name in names)
    expected = ", ".join(f"${n + i}" for i in range(len(columns)))
    return (f"SELECT 1 / (CASE WHEN ({', '.join(columns)}) IS NOT DISTINCT FROM ({expected}) THEN 1 ELSE 0 END) "
            f"FROM {', '.join(sources)}")
