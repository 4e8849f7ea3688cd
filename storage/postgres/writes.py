"""PostgreSQL's one-statement writes: a request decided at submit, a pending request, a decision's rows
and a sweep's reminders, each ONE round trip where SQLAlchemy Core took one per row or table (the
other one-statement change, a person's decision, is storage/postgres/decide.py).

- Decided at submit (policy allowed or denied it: no card), the hottest path once agents route every
  tool call through Signoff: the request row, its decision and its audit rows and the NOTIFY.
- Pending (a card to post): the request row, its "created" audit row, its card's outbox item, one
  request_people row per approver and a Home refresh for each approver who has opened App Home (read
  in the statement's own snapshot), the reads its check relied on verified in the same statement.
- A decision's rows (`insert_decision_rows`), and a sweep's reminders (arrays unnested; the update's
  RETURNING feeds both inserts).

Each is a `WITH` of data-modifying CTEs (every one runs, referenced or not) ending in `SELECT
pg_notify(...)` or a check, rendered once per shape. Invariant: the rows are exactly what the reference
unit's separate statements write (storage.base.Unit's defaults, over storage/sql.py);
tests/storage/test_decided_rows.py, test_pending_rows.py and test_sweep_contract.py compare them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from storage.base import Expect, Reminded, StaleRead
from storage.inserts import Group, TableInsert, column_casts, placeholders, table_insert, typed_placeholders
from storage.postgres.lone_unit import Deferred
from storage.schema import audit_events, decisions, outbox, request_people, requests
from storage.shapes import Shapes
from storage.sweep_sql import time_of

_PEOPLE_TAIL = " ON CONFLICT (request_id, user_id, role) DO NOTHING"
DIVISION_BY_ZERO = "22012"  # the SQLSTATE of the final SELECT that found a read moved (see insert_pending)
_SQL: Shapes[tuple[Any, ...], str] = Shapes()  # decided rows' statements by shape
_PENDING: Shapes[tuple[Any, ...], str] = Shapes()  # pending requests' statements by shape


async def insert_decided(conn: AsyncConnection, request: dict[str, Any], decision: dict[str, Any],
                         audits: Sequence[dict[str, Any]], *, notify: tuple[str, str]) -> None:
    """A request decided at submit: its row, its decision row and its audit rows (value dicts as
    storage/values.py builds them) and `pg_notify(*notify)`, in ONE statement."""
    dialect = conn.dialect
    groups: list[Group] = [(table_insert(requests, request, dialect), [request], ""),
                           (table_insert(decisions, decision, dialect), [decision], "")]
    if audits:
        groups.append((table_insert(audit_events, audits[0], dialect), audits, ""))
    await _one_statement(conn, groups, notify)


async def _one_statement(conn: AsyncConnection, groups: Sequence[Group], notify: tuple[str, str] | None) -> None:
    """PostgreSQL: each group's rows as a data-modifying CTE (every one runs, referenced or not), then
    `pg_notify(*notify)` (or `SELECT 1`): one round trip. The SQL is built once per shape."""
    params: list[Any] = [v for part, rows, _ in groups for row in rows for v in part.values(row)]
    key = (tuple((id(part), len(rows), tail) for part, rows, tail in groups), notify is not None)
    statement = _SQL.get(key, lambda: _postgres_sql([(part, len(rows), tail) for part, rows, tail in groups],
                                                    notify is not None))
    await conn.exec_driver_sql(statement, (*params, *(notify or ())))


def _postgres_sql(shape: Sequence[tuple[TableInsert, int, str]], notify: bool) -> str:
    ctes, n = [], 1
    for i, (part, count, tail) in enumerate(shape):
        rows = []
        for _ in range(count):
            rows.append(f"({placeholders(n, part.width)})")
            n += part.width
        ctes.append(f"w{i} AS (INSERT INTO {part.table} ({part.columns}) VALUES {', '.join(rows)}{tail})")
    end = f"SELECT pg_notify(${n}, ${n + 1})" if notify else "SELECT 1"
    return f"WITH {', '.join(ctes)} {end}"


async def insert_decision_rows(conn: AsyncConnection, decision: dict[str, Any], audit: dict[str, Any],
                               items: Sequence[dict[str, Any]], *, notify: tuple[str, str]) -> None:
    """PostgreSQL: a decision's row, its audit row and its outbox items (`ON CONFLICT (dedupe_key) DO
    NOTHING`, as `SqlUnit.enqueue`), and `pg_notify(*notify)`, in ONE statement. The value dicts are
    what storage.sql builds for the separate inserts, through the same bind processors."""
    dialect = conn.dialect
    assert dialect.name == "postgresql"
    groups: list[Group] = [(table_insert(decisions, decision, dialect), [decision], ""),
                           (table_insert(audit_events, audit, dialect), [audit], "")]
    if items:
        groups.append((table_insert(outbox, items[0], dialect), items, " ON CONFLICT (dedupe_key) DO NOTHING"))
    await _one_statement(conn, groups, notify)


async def insert_pending(conn: AsyncConnection, request: dict[str, Any], audit: dict[str, Any],
                         items: Sequence[tuple[str | None, dict[str, Any]]], people: Sequence[dict[str, Any]], *,
                         expects: Sequence[Expect] = ()) -> None:
    """A new pending request in ONE statement: its row, its audit row, its outbox items ((user id, row)
    in order; a row with a user id is written only if that user is in home_users, one without always)
    and its request_people rows; every outbox and people row skipped if its key is taken. Raises
    IntegrityError (nothing written) when the request's idempotency key is taken.

    `expects`: reads the caller relied on, verified in the statement's own snapshot by its final
    SELECT, which divides by zero when one of them no longer holds, so the statement fails and writes
    nothing: StaleRead is raised. The statement ends its change (storage.base.Unit.insert_pending): as
    a lone unit's first statement it is the whole unit, its own transaction (`Deferred.sole`)."""
    dialect = conn.dialect
    parts = (table_insert(requests, request, dialect), table_insert(audit_events, audit, dialect),
             table_insert(outbox, items[0][1], dialect))
    person = table_insert(request_people, people[0], dialect) if people else None
    key = (id(dialect), *(id(p) for p in parts), id(person), len(items), len(people),
           *(id(e.statement) for e in expects))
    statement = _PENDING.get(key, lambda: _pending_statement(dialect, parts, tuple(items[0][1]), person, len(items),
                                                             len(people), expects))
    rq, au, ob = parts
    flat = [*rq.values(request), *au.values(audit), *(v for user, row in items for v in (*ob.values(row), user))]
    if person is not None:
        flat += [v for row in people for v in person.values(row)]
    flat += [v for e in expects for v in e.params]
    flat += [v for e in expects for v in e.value]
    try:
        if isinstance(conn, Deferred):
            await conn.sole(statement, flat)
        else:
            await conn.exec_driver_sql(statement, tuple(flat))
    except DBAPIError as exc:
        if expects and getattr(exc.orig, "sqlstate", None) == DIVISION_BY_ZERO:  # only the final SELECT divides
            raise StaleRead(tuple(e.value for e in expects)) from None
        raise


def _pending_statement(dialect: Dialect, parts: tuple[TableInsert, TableInsert, TableInsert], names: tuple[str, ...],
                       person: TableInsert | None, items: int, people: int, expects: Sequence[Expect]) -> str:
    rq, au, ob = parts
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
    return f"WITH {', '.join(ctes)} {_verify(dialect, expects, n) if expects else 'SELECT 1'}"


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


async def write_reminders(conn: AsyncConnection, reminders: Sequence[Reminded]) -> tuple[list[str], int]:
    """The reminders in ONE statement per batch (see storage/sweep_sql.py): the ids written, in order,
    and the number of outbox items stored."""
    t = time_of(conn.dialect)
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
