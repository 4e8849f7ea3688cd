"""A person's decision on PostgreSQL in ONE statement (`SqlUnit.decide_request`).

A decision was five round trips in its unit: BEGIN, the version-guarded UPDATE, the read of the
App Home users to refresh, the decision's rows (storage/postgres/writes.py), COMMIT; on loopback each costs
more wall time than the work it carries. Here the guarded UPDATE is a data-modifying CTE
(`upd ... RETURNING id`), the App Home users a plain CTE, and every insert (the decisions row, the
audit row, the outbox items and one App Home refresh per user) selects `FROM upd`: when the guard
does not match, `upd` is empty and the statement writes nothing at all. The final SELECT returns
whether the guard matched and how many outbox rows were stored, and calls `pg_notify` for the
request only if it matched.

Invariants (tests/storage/test_decide_rows.py compares the raw rows with the generic sequence's):
- Every value goes through its column's bind processor for the dialect, as storage/inserts.py does.
- The App Home items are the caller's own `home(user)` items: `home` is called once with a sentinel
  user id, and each column of its row is either a constant (bound as is) or contains the sentinel
  exactly once (bound as the text around it, the user id spliced in by SQL: `to_json(user_id)` in a
  JSON column, which is Python's `json.dumps` for printable-ASCII ids such as every Slack user id).
  An item the SQL cannot express that way is not written here: the caller falls back to the sequence.
- Outbox rows are stored in the generic order (the items as given, then the homes by user id in code
  point order, as `sorted` gives) by one INSERT ... ORDER BY, each skipped if its dedupe_key is taken.
- The statement text is built once per shape (columns, number of items, the home row's form), so
  asyncpg's prepared statement cache serves it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection

from storage.inserts import json_text, table_insert
from storage.postgres.lone_unit import Deferred
from storage.shapes import Shapes
from storage.schema import UTCDateTime, audit_events, decisions, home_users, outbox, request_people, requests

HOME_SENTINEL = "\x00user\x00"  # a user id no Slack user has (PostgreSQL text cannot even hold it)
_MARKER = json_text(HOME_SENTINEL)  # the sentinel as JSON text writes it
_BARE = _MARKER[1:-1]

# How one column of the home row is written: a constant, or the text around the user id.
Form = tuple[str, Any] | tuple[str, str, str]  # ("const", value) | ("text" | "json", before, after)
_SQL: Shapes[tuple[Any, ...], str] = Shapes()


def _pg_type(column: sa.Column[Any]) -> str:
    """The cast that gives a bound parameter its column's type (strings as text: the INSERT's own
    assignment to varchar(n) then checks the length, as the generic insert does)."""
    kind = column.type
    if isinstance(kind, sa.JSON):
        return "json"
    if isinstance(kind, UTCDateTime):
        return "timestamptz"
    if isinstance(kind, sa.Boolean):
        return "boolean"
    if isinstance(kind, sa.BigInteger):
        return "bigint"
    if isinstance(kind, sa.Integer):
        return "integer"
    return "text"


def home_forms(home: dict[str, Any], dialect: Dialect) -> tuple[Form, ...] | None:
    """Each column of the sentinel home row (`outbox_values(home(HOME_SENTINEL))`) as a Form, or None
    if some column uses the user id in a way the statement cannot reproduce exactly."""
    forms: list[Form] = []
    for name, value in zip(home, table_insert(outbox, home, dialect).values(home), strict=True):
        json_column = isinstance(outbox.c[name].type, sa.JSON)
        if not isinstance(value, str):
            forms.append(("const", value))
        elif json_column and value.count(_BARE) == value.count(_MARKER) == 1:
            before, after = value.split(_MARKER)
            forms.append(("json", before, after))
        elif json_column and _BARE not in value:
            forms.append(("const", value))
        elif not json_column and value.count(HOME_SENTINEL) == 1:
            before, after = value.split(HOME_SENTINEL)
            forms.append(("text", before, after))
        elif not json_column and HOME_SENTINEL not in value:
            forms.append(("const", value))
        else:
            return None
    return tuple(forms)


async def decide_in_one(conn: AsyncConnection, request_id: str, expected_version: int, update: dict[str, Any],
                        decision: dict[str, Any], audit: dict[str, Any], items: Sequence[dict[str, Any]],
                        home: dict[str, Any], decider: str | None, channel: str, *,
                        final: bool = False) -> tuple[bool, int] | None:
    """The guarded write of `update` (mutable request columns) over `expected_version` and, only if it
    matched, the decision row, the audit row, `items` and a `home` row per App Home user of the request
    (or `decider`), and the NOTIFY on `channel`: one statement. Returns (matched, outbox rows stored),
    or None, having sent nothing, when the home row cannot be built in SQL (see `home_forms`).
    `final`: nothing follows it in its unit; in a lone unit it then runs as the `sole` statement."""
    dialect = conn.dialect
    assert dialect.name == "postgresql"
    forms = home_forms(home, dialect)
    if forms is None or any(tuple(item) != tuple(home) for item in items):
        return None
    upd = table_insert(requests, update, dialect)
    dec = table_insert(decisions, decision, dialect)
    aud = table_insert(audit_events, audit, dialect)
    params: list[Any] = [request_id, expected_version, expected_version + 1, decider, channel,
                         *upd.values(update), *dec.values(decision), *aud.values(audit)]
    for item in items:
        params.extend(table_insert(outbox, item, dialect).values(item))
    for form in forms:
        params.extend(form[1:])
    key = (tuple(update), tuple(decision), tuple(audit), tuple(tuple(i) for i in items), tuple(home),
           tuple(f[0] for f in forms))
    statement = _SQL.get(key, lambda: _statement(key, forms))
    if final and isinstance(conn, Deferred):
        row: Any = await conn.sole(statement, params)
    else:
        row = (await conn.exec_driver_sql(statement, tuple(params))).one()
    return bool(row[0]), int(row[1])


def _statement(key: tuple[Any, ...], forms: tuple[Form, ...]) -> str:
    update, decision, audit, items, home, _ = key
    n = 6  # $1 request id, $2 expected version, $3 new version, $4 decider, $5 NOTIFY channel

    def take(width: int) -> list[str]:
        nonlocal n
        taken = [f"${i}" for i in range(n, n + width)]
        n += width
        return taken

    def q(table: sa.Table, name: str) -> str:
        return f'"{table.c[name].name}"'

    def select(table: sa.Table, names: Sequence[str]) -> str:
        return ", ".join(f"{p}::{_pg_type(table.c[c])}" for p, c in zip(take(len(names)), names, strict=True))

    sets = ", ".join(f"{q(requests, c)} = {p}" for c, p in zip(update, take(len(update)), strict=True))
    ctes = [
        f"upd AS (UPDATE requests SET version = $3, {sets} WHERE id = $1 AND version = $2 RETURNING id)",
        # The App Home users of the request's people and the decider (SqlUnit.home_users_of's read).
        f"homes AS (SELECT user_id FROM {home_users.name} WHERE user_id IN (SELECT user_id FROM "
        f"{request_people.name} WHERE request_id = $1) OR user_id = $4)",
        f"dec AS (INSERT INTO decisions ({', '.join(q(decisions, c) for c in decision)}) "
        f"SELECT {select(decisions, decision)} FROM upd)",
        f"aud AS (INSERT INTO audit_events ({', '.join(q(audit_events, c) for c in audit)}) "
        f"SELECT {select(audit_events, audit)} FROM upd)",
    ]
    rows = [f"SELECT {i} AS o, NULL::text AS u, {select(outbox, names)}" for i, names in enumerate(items)]
    columns = []
    for name, form in zip(home, forms, strict=True):
        cast = _pg_type(outbox.c[name])
        if form[0] == "const":
            columns.append(f"{take(1)[0]}::{cast}")
        elif form[0] == "text":
            before, after = take(2)
            columns.append(f"({before}::text || h.user_id || {after}::text)")
        else:
            before, after = take(2)
            columns.append(f"({before}::text || to_json(h.user_id)::text || {after}::text)::json")
    rows.append(f"SELECT {len(items)} AS o, h.user_id::text AS u, {', '.join(columns)} FROM homes h")
    names = ", ".join(q(outbox, c) for c in home)
    aliases = ", ".join(f"c{i}" for i in range(len(home)))
    ctes.append(
        f"box AS (INSERT INTO outbox ({names}) SELECT {aliases} FROM ({' UNION ALL '.join(rows)}) "
        f"AS x (o, u, {aliases}) WHERE EXISTS (SELECT 1 FROM upd) ORDER BY o, u COLLATE \"C\" "
        f"ON CONFLICT (dedupe_key) DO NOTHING RETURNING 1)")
    return (f"WITH {', '.join(ctes)} SELECT (SELECT count(*) FROM upd), (SELECT count(*) FROM box), "
            f"(SELECT count(*) FROM upd, LATERAL pg_notify($5, upd.id))")
