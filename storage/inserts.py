"""One table's INSERT rendered once per engine and column list, its values through each column's own bind
processor: the pieces the engines' one-statement writes (storage/sqlite/writes.py,
storage/postgres/writes.py, storage/postgres/decide.py) build from. What they store is exactly what the
SQLAlchemy Core statements of the reference unit (storage.base.Unit's defaults over storage/sql.py)
store: the same value dicts (storage/values.py), the same processors (JSON as SQLAlchemy serialises
it, UTC datetimes as UTCDateTime stores them)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

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
