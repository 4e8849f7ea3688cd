"""Delivered outbox items' results on PostgreSQL in ONE statement (`SqlStore.outbox_finished`).

A group of deliveries that ended `Done` with nothing of their own to write but a card's ts (card
posts, card updates, Home refreshes) is the cards' ts, their audit rows and their done marks. In a
unit that was BEGIN, per card post the guarded ts UPDATE and its "posted" audit INSERT, the audit
INSERT, the done UPDATE, COMMIT: 5 round trips for a lone card post, 2N + 3 for N. Here each is a
data-modifying CTE: the ts UPDATE joins a VALUES list and keeps its guard (`card_ts IS NULL`), the
"posted" rows are inserted only for the requests it RETURNs (as `Unit.record_card` does), the done
UPDATE joins a VALUES list of (id, done_at). One statement, which on the AUTOCOMMIT engine is a
transaction of its own, so everything is written together or not at all, as in the unit.

Every value goes through its column's bind processor (storage/inserts.TableInsert), and the text is
built once per shape (how many audit rows and marks), so asyncpg's prepared statements serve it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Dialect

from bot.domain.model import AuditEvent
from storage.base import CardPosted
from storage.inserts import TableInsert, column_casts, table_insert, typed_placeholders
from storage.schema import audit_events, outbox, requests
from storage.shapes import Shapes
from storage.values import audit_values

_SQL: Shapes[tuple[int, int, int, int, int], str] = Shapes()  # by (ids of the two inserts, cards, audit rows, marks)


def stored_cards(rows: Sequence[Any]) -> set[str]:
    """The requests whose card `finish_statement`'s statement stored, from its rows."""
    return {row[0] for row in rows if row[0] is not None}


def finish_statement(dialect: Dialect, done: Sequence[tuple[int, datetime]], audits: Sequence[AuditEvent],
                     cards: Sequence[tuple[CardPosted, datetime]] = ()) -> tuple[str, tuple[Any, ...]] | None:
    """`finish_in_one`'s statement and its parameters, or None when there is nothing to write."""
    assert dialect.name == "postgresql"
    ts_rows = [{"id": card.request_id, "card_channel": card.channel, "card_ts": card.ts, "updated_at": at}
               for card, at in cards]
    posted = [audit_values(card.audit(at)) for card, at in cards]
    rows = [audit_values(e) for e in audits]
    marks = [{"id": item_id, "done_at": at} for item_id, at in done]
    if not ts_rows and not rows and not marks:
        return None
    # Posted or not, an audit row has audit_values' columns: one insert (table_insert's, by column list).
    audit = table_insert(audit_events, (posted or rows)[0], dialect) if posted or rows else None
    ts = table_insert(requests, ts_rows[0], dialect) if ts_rows else None
    params: list[Any] = []
    for ts_row, posted_row in zip(ts_rows, posted, strict=True):
        assert ts is not None and audit is not None
        params.extend(ts.values(ts_row))
        params.extend(audit.values(posted_row))
    if audit is not None:
        params.extend(v for row in rows for v in audit.values(row))
    if marks:
        mark = table_insert(outbox, marks[0], dialect)
        params.extend(v for row in marks for v in mark.values(row))
    key = (id(audit), id(ts), len(cards), len(rows), len(marks))
    statement = _SQL.get(key, lambda: _statement(audit, ts, len(cards), len(rows), len(marks), dialect))
    return statement, tuple(params)


def _statement(audit: TableInsert | None, ts: TableInsert | None, cards: int, audits: int, marks: int,
               dialect: Dialect) -> str:
    """The statement for a group's shape. Its audit rows are one INSERT, the cards' "posted" rows first
    (as `Store.outbox_finished`'s unit writes them), then the others."""
    ctes, n = [], 1
    inserts: list[str] = []  # the audit INSERT's row sources, in order
    audit_casts = column_casts(audit_events, audit.names, dialect) if audit is not None else ()
    if cards:
        assert ts is not None and audit is not None
        ts_casts = column_casts(requests, ts.names, dialect)
        ts_rows, posted_rows = [], []
        for _ in range(cards):
            ts_rows.append(f"({typed_placeholders(n, ts_casts)})")
            n += ts.width
            posted_rows.append(f"({typed_placeholders(n, audit_casts)})")
            n += audit.width
        ctes.append("c AS (UPDATE requests SET card_channel = x.card_channel, card_ts = x.card_ts, "
                    "updated_at = x.updated_at, version = requests.version + 1 "
                    f"FROM (VALUES {', '.join(ts_rows)}) AS x ({', '.join(ts.names)}) "
                    "WHERE requests.id = x.id AND requests.card_ts IS NULL RETURNING requests.id)")
        aliases = [f"v{i}" for i in range(audit.width)]
        rid = aliases[audit.names.index("request_id")]
        inserts.append(f"SELECT {', '.join(aliases)} FROM (VALUES {', '.join(posted_rows)}) AS y ({', '.join(aliases)}) "
                       f"WHERE y.{rid} IN (SELECT id FROM c)")
    if audits:  # typed too: a UNION ALL's branch has no target column to take its types from
        assert audit is not None
        values = []
        for _ in range(audits):
            values.append(f"({typed_placeholders(n, audit_casts)})")
            n += audit.width
        inserts.append(f"VALUES {', '.join(values)}")
    if inserts:  # the table and columns as the dialect quotes them (storage/inserts.py)
        assert audit is not None
        ctes.append(f"a AS (INSERT INTO {audit.table} ({audit.columns}) {' UNION ALL '.join(inserts)})")
    if marks:
        values = [f"(${n + 2 * i}::bigint, ${n + 2 * i + 1}::timestamptz)" for i in range(marks)]
        ctes.append("d AS (UPDATE outbox SET status = 'done', done_at = x.done_at, lease_until = NULL "
                    f"FROM (VALUES {', '.join(values)}) AS x (id, done_at) WHERE outbox.id = x.id)")
    return f"WITH {', '.join(ctes)} {'SELECT id FROM c' if cards else 'SELECT NULL'}"
