"""A request decided at submit (policy allowed or denied it: no card) written in the fewest statements.

The auto-allowed path is the hottest of all once agents route every tool call through Signoff: the
request row, its decision and its two audit rows, for a request nobody will see on a card. Through
SQLAlchemy Core that was four executions, each compiling parameters and running every column's bind
processor (bench.all --only auto --profile: 20 `json.dumps` per request, a third of the server's
samples in statement execution). Here the statements are rendered once per engine and column set,
and executed as driver SQL:

- PostgreSQL: ONE statement. The inserts are data-modifying CTEs of a `SELECT pg_notify(...)`
  (every data-modifying CTE runs, referenced or not), so the rows and the NOTIFY cost one round
  trip instead of four.
- SQLite: three statements on the unit's connection (one per table; both audit rows in one).

Invariant: the rows are exactly what `SqlUnit.insert_request`, `insert_decision` and
`append_audits` write: the same value dicts (storage.sql builds them for both), each passed through
its column type's own bind processor for the dialect (JSON as SQLAlchemy serialises it, UTC datetimes
as UTCDateTime stores them). tests/storage/test_decided_rows.py compares the raw rows on both engines.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from storage.schema import audit_events, decisions, outbox, requests

Processor = Callable[[Any], Any] | None


class _Insert:
    """One table's INSERT for a fixed column list: its SQL pieces and each column's bind processor."""

    def __init__(self, table: sa.Table, names: tuple[str, ...], dialect: Dialect) -> None:
        quote = dialect.identifier_preparer
        self.table = quote.format_table(table)
        self.columns = ", ".join(quote.format_column(table.c[n]) for n in names)
        self.processors: tuple[Processor, ...] = tuple(
            _json_text if isinstance(table.c[n].type, sa.JSON) else table.c[n].type._cached_bind_processor(dialect)
            for n in names)
        self.width = len(names)
        self._sql: dict[int, str] = {}

    def sql(self, rows: int) -> str:
        """SQLite's INSERT of `rows` rows (qmark placeholders)."""
        found = self._sql.get(rows)
        if found is None:
            one = f"({', '.join('?' * self.width)})"
            found = self._sql[rows] = f"INSERT INTO {self.table} ({self.columns}) VALUES {', '.join([one] * rows)}"
        return found

    def values(self, row: dict[str, Any]) -> list[Any]:
        return [v if p is None else p(v) for v, p in zip(row.values(), self.processors, strict=True)]


def _json_text(value: Any) -> str:
    """What SQLAlchemy's JSON bind processor writes (`json.dumps(value)`, None as 'null'), without
    building a new C encoder on every call as `json.dumps` does: the same encoder, made once."""
    if value is None:
        return "null"
    return "".join(_ENCODE(value, 0)) if _ENCODE is not None else json.dumps(value)


_ENCODE = (None if c_make_encoder is None else  # the arguments json.dumps passes by default
           c_make_encoder(None, json.JSONEncoder().default, encode_basestring_ascii, float.__repr__, ": ", ", ",
                          False, False, True))


_INSERTS: dict[tuple[str, int, tuple[str, ...]], _Insert] = {}


def _insert(table: sa.Table, row: dict[str, Any], dialect: Dialect) -> _Insert:
    key = (table.name, id(dialect), tuple(row))
    found = _INSERTS.get(key)
    if found is None:
        found = _INSERTS[key] = _Insert(table, tuple(row), dialect)
    return found


def _placeholders(start: int, width: int) -> str:
    return ", ".join(f"${n}" for n in range(start, start + width))


_SQL: dict[tuple[int, int, int, int, int], str] = {}


async def insert_decided(conn: AsyncConnection, request: dict[str, Any], decision: dict[str, Any],
                         audits: Sequence[dict[str, Any]], *, notify: tuple[str, str] | None) -> None:
    """Insert one request row, its decision row and its audit rows (value dicts as storage.sql builds
    them); on PostgreSQL also `pg_notify(*notify)`, all in one statement."""
    dialect = conn.dialect
    postgres = dialect.name == "postgresql"
    parts = [_insert(requests, request, dialect), _insert(decisions, decision, dialect)]
    audit = _insert(audit_events, audits[0], dialect) if audits else None
    if not postgres:
        # The unit's own sqlite3 connection, inside its BEGIN IMMEDIATE: through the InlineConnection's
        # `_execute`, so a statement that meets another process's lock still waits on the worker thread.
        driver: Any = conn.sync_connection.connection.driver_connection  # type: ignore[union-attr]
        execute = driver._connection.execute
        statements = [(part.sql(1), part.values(row)) for part, row in zip(parts, (request, decision), strict=True)]
        if audit is not None:
            statements.append((audit.sql(len(audits)), [v for row in audits for v in audit.values(row)]))
        for sql, values in statements:
            try:
                await driver._execute(execute, sql, values)
            except sqlite3.IntegrityError as exc:  # as SQLAlchemy reports it (a taken idempotency key)
                raise IntegrityError(sql, values, exc) from exc
        return
    params = [*parts[0].values(request), *parts[1].values(decision)]
    if audit is not None:
        for row in audits:
            params += audit.values(row)
    key = (id(parts[0]), id(parts[1]), id(audit), len(audits), notify is not None)
    statement = _SQL.get(key)
    if statement is None:
        statement = _SQL[key] = _postgres_sql(parts, audit, len(audits), notify is not None)
    if notify is not None:
        params += notify
    await conn.exec_driver_sql(statement, tuple(params))


def _postgres_sql(parts: list[_Insert], audit: _Insert | None, audits: int, notify: bool) -> str:
    ctes, n = [], 1
    for i, part in enumerate(parts):
        ctes.append(f"w{i} AS (INSERT INTO {part.table} ({part.columns}) VALUES ({_placeholders(n, part.width)}))")
        n += part.width
    if audit is not None:
        rows = []
        for _ in range(audits):
            rows.append(f"({_placeholders(n, audit.width)})")
            n += audit.width
        ctes.append(f"w{len(ctes)} AS (INSERT INTO {audit.table} ({audit.columns}) VALUES {', '.join(rows)})")
    tail = f"SELECT pg_notify(${n}, ${n + 1})" if notify else "SELECT 1"
    return f"WITH {', '.join(ctes)} {tail}"


_DECISION_SQL: dict[tuple[int, int, int, int], str] = {}


async def insert_decision_rows(conn: AsyncConnection, decision: dict[str, Any], audit: dict[str, Any],
                               items: Sequence[dict[str, Any]], *, notify: tuple[str, str]) -> None:
    """PostgreSQL: a decision's row, its audit row and its outbox items (`ON CONFLICT (dedupe_key) DO
    NOTHING`, as `SqlUnit.enqueue`), and `pg_notify(*notify)`, in ONE statement. The value dicts are
    what storage.sql builds for the separate inserts, through the same bind processors."""
    dialect = conn.dialect
    assert dialect.name == "postgresql"
    parts = [_insert(decisions, decision, dialect), _insert(audit_events, audit, dialect)]
    queued = _insert(outbox, items[0], dialect) if items else None
    params = [*parts[0].values(decision), *parts[1].values(audit)]
    for row in items:
        assert queued is not None
        params += queued.values(row)
    key = (id(parts[0]), id(parts[1]), id(queued), len(items))
    statement = _DECISION_SQL.get(key)
    if statement is None:
        statement = _DECISION_SQL[key] = _decision_sql(parts, queued, len(items))
    await conn.exec_driver_sql(statement, (*params, *notify))


def _decision_sql(parts: list[_Insert], queued: _Insert | None, items: int) -> str:
    ctes, n = [], 1
    for i, part in enumerate(parts):
        ctes.append(f"w{i} AS (INSERT INTO {part.table} ({part.columns}) VALUES ({_placeholders(n, part.width)}))")
        n += part.width
    if queued is not None:
        rows = []
        for _ in range(items):
            rows.append(f"({_placeholders(n, queued.width)})")
            n += queued.width
        ctes.append(f"w{len(ctes)} AS (INSERT INTO {queued.table} ({queued.columns}) VALUES {', '.join(rows)} "
                    "ON CONFLICT (dedupe_key) DO NOTHING)")
    return f"WITH {', '.join(ctes)} SELECT pg_notify(${n}, ${n + 1})"
