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

from storage.sqlite import driver as sqlite_driver
from storage.schema import audit_events, decisions, outbox, requests

Processor = Callable[[Any], Any] | None


class TableInsert:
    """One table's INSERT for a fixed column list: its SQL pieces and each column's bind processor."""

    def __init__(self, table: sa.Table, names: tuple[str, ...], dialect: Dialect) -> None:
        self.dialect = dialect  # held: _INSERTS keys on id(dialect), which must not be reused meanwhile
        quote = dialect.identifier_preparer
        self.table = quote.format_table(table)
        self.names = names
        self.columns = ", ".join(quote.format_column(table.c[n]) for n in names)
        self.processors: tuple[Processor, ...] = tuple(
            json_text if isinstance(table.c[n].type, sa.JSON) else table.c[n].type._cached_bind_processor(dialect)
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


def json_text(value: Any) -> str:
    """What SQLAlchemy's JSON bind processor writes (`json.dumps(value)`, None as 'null'), without
    building a new C encoder on every call as `json.dumps` does: the same encoder, made once."""
    if value is None:
        return "null"
    return "".join(_ENCODE(value, 0)) if _ENCODE is not None else json.dumps(value)


_ENCODE = (None if c_make_encoder is None else  # the arguments json.dumps passes by default
           c_make_encoder(None, json.JSONEncoder().default, encode_basestring_ascii, float.__repr__, ": ", ", ",
                          False, False, True))


_INSERTS: dict[tuple[str, int, tuple[str, ...]], TableInsert] = {}


def table_insert(table: sa.Table, row: dict[str, Any], dialect: Dialect) -> TableInsert:
    key = (table.name, id(dialect), tuple(row))
    found = _INSERTS.get(key)
    if found is None:
        found = _INSERTS[key] = TableInsert(table, tuple(row), dialect)
    return found


def placeholders(start: int, width: int) -> str:
    return ", ".join(f"${n}" for n in range(start, start + width))


def sql_cast(type_: Any, dialect: Dialect) -> str:
    """The column's type for a cast of a parameter in a VALUES list, strings without their length: a cast
    to VARCHAR(n) would cut a longer value silently, where the write itself refuses it."""
    impl = type_.dialect_impl(dialect)
    if isinstance(impl, sa.String):
        return "VARCHAR"
    if isinstance(impl, sa.DateTime):
        return "TIMESTAMP WITH TIME ZONE" if impl.timezone else "TIMESTAMP"
    return str(dialect.type_compiler_instance.process(impl))


_CASTS: dict[tuple[str, int, tuple[str, ...]], tuple[str, ...]] = {}


def column_casts(table: sa.Table, names: tuple[str, ...], dialect: Dialect) -> tuple[str, ...]:
    """`sql_cast` of each of `table`'s columns `names` (built once per column list)."""
    key = (table.name, id(dialect), names)
    found = _CASTS.get(key)
    if found is None:
        found = _CASTS[key] = tuple(sql_cast(table.c[n].type, dialect) for n in names)
    return found


def typed_placeholders(start: int, casts: Sequence[str]) -> str:
    """A VALUES row's parameters from `$start` on, each cast to its column's type (nothing else in a
    VALUES list outside an INSERT's own tells PostgreSQL their types)."""
    return ", ".join(f"${start + i}::{cast}" for i, cast in enumerate(casts))


Group = tuple[TableInsert, Sequence[dict[str, Any]], str]  # a table's insert, its rows, what follows VALUES
_SQL: dict[tuple[Any, ...], str] = {}  # PostgreSQL statements by shape


async def insert_decided(conn: AsyncConnection, request: dict[str, Any], decision: dict[str, Any],
                         audits: Sequence[dict[str, Any]], *, notify: tuple[str, str] | None) -> None:
    """Insert one request row, its decision row and its audit rows (value dicts as storage.sql builds
    them); on PostgreSQL also `pg_notify(*notify)`, all in one statement."""
    dialect = conn.dialect
    postgres = dialect.name == "postgresql"
    parts = [table_insert(requests, request, dialect), table_insert(decisions, decision, dialect)]
    audit = table_insert(audit_events, audits[0], dialect) if audits else None
    if not postgres:
        # The unit's own sqlite3 connection, inside its BEGIN IMMEDIATE: through the InlineConnection's
        # `_execute`, so a statement that meets another process's lock still waits on the worker thread.
        driver = sqlite_driver.aio(conn)
        statements = [(part.sql(1), part.values(row)) for part, row in zip(parts, (request, decision), strict=True)]
        if audit is not None:
            statements.append((audit.sql(len(audits)), [v for row in audits for v in audit.values(row)]))
        for sql, values in statements:
            try:
                await sqlite_driver.execute(driver, sql, values)
            except sqlite3.IntegrityError as exc:  # as SQLAlchemy reports it (a taken idempotency key)
                raise IntegrityError(sql, values, exc) from exc
        return
    groups: list[Group] = [(parts[0], [request], ""), (parts[1], [decision], "")]
    if audit is not None:
        groups.append((audit, audits, ""))
    await _one_statement(conn, groups, notify)


async def _one_statement(conn: AsyncConnection, groups: Sequence[Group], notify: tuple[str, str] | None) -> None:
    """PostgreSQL: each group's rows as a data-modifying CTE (every one runs, referenced or not), then
    `pg_notify(*notify)` (or `SELECT 1`): one round trip. The SQL is built once per shape."""
    params: list[Any] = [v for part, rows, _ in groups for row in rows for v in part.values(row)]
    key = (tuple((id(part), len(rows), tail) for part, rows, tail in groups), notify is not None)
    statement = _SQL.get(key)
    if statement is None:
        statement = _SQL[key] = _postgres_sql([(part, len(rows), tail) for part, rows, tail in groups],
                                              notify is not None)
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
