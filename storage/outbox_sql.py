"""Delivered outbox items' results on PostgreSQL in ONE statement (`SqlStore.outbox_finished`).

A group of deliveries that ended `Done` with nothing of their own to write but a card's ts (card
posts, card updates, Home refreshes) is the cards' ts, their audit rows and their done marks. In a
unit that was BEGIN, per card post the guarded ts UPDATE and its "posted" audit INSERT, the audit
INSERT, the done UPDATE, COMMIT: 5 round trips for a lone card post, 2N + 3 for N. Here each is a
data-modifying CTE: the ts UPDATE joins a VALUES list and keeps its guard (`card_ts IS NULL`), the
"posted" rows are inserted only for the requests it RETURNs (as `Unit.record_card` does), the done
UPDATE joins a VALUES list of (id, done_at). One statement, which on the AUTOCOMMIT engine is a
transaction of its own, so everything is written together or not at all, as in the unit.

Every value goes through its column's bind processor (storage/decided.TableInsert), and the text is
built once per shape (how many audit rows and marks), so asyncpg's prepared statements serve it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from bot.domain.model import AuditEvent
from storage.base import CardPosted
from storage.decided import TableInsert, sql_cast, table_insert
from storage.schema import audit_events, outbox, requests
from storage.values import audit_values

_SQL: dict[tuple[int, int, int, int], str] = {}  # by (id of the audit insert, cards, audit rows, marks)
_CASTS: dict[tuple[str, int, tuple[str, ...]], tuple[str, ...]] = {}


async def finish_in_one(conn: AsyncConnection, done: Sequence[tuple[int, datetime]],
                        audits: Sequence[AuditEvent], cards: Sequence[tuple[CardPosted, datetime]] = ()) -> set[str]:
    """PostgreSQL: `cards` stored (each with its "posted" audit row, if stored), `audits` inserted and
    the items `done` (id, when) marked done, in one statement. Returns the ids of the requests whose
    card it stored."""
    dialect = conn.dialect
    assert dialect.name == "postgresql"
    rows = [audit_values(e) for e in audits]
    marks = [{"id": item_id, "done_at": at} for item_id, at in done]
    if not rows and not marks and not cards:
        return set()
    params: list[Any] = []
    for card, at in cards:
        ts_row = {"id": card.request_id, "card_channel": card.channel, "card_ts": card.ts, "updated_at": at}
        posted = audit_values(card.audit(at))
        params.extend(table_insert(requests, ts_row, dialect).values(ts_row))
        params.extend(table_insert(audit_events, posted, dialect).values(posted))
    audit = table_insert(audit_events, rows[0], dialect) if rows else None
    if audit is not None:
        params.extend(v for row in rows for v in audit.values(row))
    if marks:
        mark = table_insert(outbox, marks[0], dialect)
        params.extend(v for row in marks for v in mark.values(row))
    key = (id(audit), len(cards), len(rows), len(marks))  # table_insert keeps one TableInsert per column list
    statement = _SQL.get(key)
    if statement is None:
        statement = _SQL[key] = _statement(audit, len(cards), len(rows), len(marks), dialect)
    result = await conn.exec_driver_sql(statement, tuple(params))
    return {row[0] for row in result.all() if row[0] is not None}


def _casts(table: sa.Table, names: tuple[str, ...], dialect: Dialect) -> tuple[str, ...]:
    """A `::type` per column, for parameters in a VALUES list (whose types nothing else tells)."""
    key = (table.name, id(dialect), names)
    found = _CASTS.get(key)
    if found is None:
        found = _CASTS[key] = tuple(sql_cast(table.c[n].type, dialect) for n in names)
    return found


def _typed_values(start: int, casts: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"${start + i}::{cast}" for i, cast in enumerate(casts)) + ")"


def _statement(audit: TableInsert | None, cards: int, audits: int, marks: int, dialect: Dialect) -> str:
    """The statement for a group's shape. Its audit rows are one INSERT, the cards' "posted" rows first
    (as `Store.outbox_finished`'s unit writes them), then the others."""
    ctes, n = [], 1
    inserts: list[str] = []  # the audit INSERT's row sources, in order
    posted: TableInsert | None = None
    if cards:
        ts_names = ("id", "card_channel", "card_ts", "updated_at")
        posted = table_insert(audit_events, audit_values(CardPosted("", "", "").audit(datetime.min)), dialect)
        posted_names = posted.names
        ts_casts, posted_casts = _casts(requests, ts_names, dialect), _casts(audit_events, posted_names, dialect)
        ts_rows, posted_rows = [], []
        for _ in range(cards):
            ts_rows.append(_typed_values(n, ts_casts))
            n += len(ts_casts)
            posted_rows.append(_typed_values(n, posted_casts))
            n += len(posted_casts)
        ctes.append("c AS (UPDATE requests SET card_channel = x.card_channel, card_ts = x.card_ts, "
                    "updated_at = x.updated_at, version = requests.version + 1 "
                    f"FROM (VALUES {', '.join(ts_rows)}) AS x ({', '.join(ts_names)}) "
                    "WHERE requests.id = x.id AND requests.card_ts IS NULL RETURNING requests.id)")
        aliases = [f"v{i}" for i in range(len(posted_names))]
        rid = aliases[posted_names.index("request_id")]
        inserts.append(f"SELECT {', '.join(aliases)} FROM (VALUES {', '.join(posted_rows)}) AS y ({', '.join(aliases)}) "
                       f"WHERE y.{rid} IN (SELECT id FROM c)")
    if audit is not None:  # the table and columns as the dialect quotes them (storage/decided.py)
        assert posted is None or posted.columns == audit.columns
        casts = _casts(audit_events, audit.names, dialect)  # typed: a UNION ALL's branch has no target column
        values = []
        for _ in range(audits):
            values.append(_typed_values(n, casts))
            n += audit.width
        inserts.append(f"VALUES {', '.join(values)}")
    target = audit or posted
    if target is not None:
        ctes.append(f"a AS (INSERT INTO {target.table} ({target.columns}) {' UNION ALL '.join(inserts)})")
    if marks:
        values = [f"(${n + 2 * i}::bigint, ${n + 2 * i + 1}::timestamptz)" for i in range(marks)]
        ctes.append("d AS (UPDATE outbox SET status = 'done', done_at = x.done_at, lease_until = NULL "
                    f"FROM (VALUES {', '.join(values)}) AS x (id, done_at) WHERE outbox.id = x.id)")
    return f"WITH {', '.join(ctes)} {'SELECT id FROM c' if cards else 'SELECT NULL'}"
