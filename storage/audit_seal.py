"""Sealing audit rows into the hash chain (bot/domain/audit_chain.py), in SQLAlchemy Core on a sync
connection: the migration that chains existing rows calls it as it is, the server through `run_sync`.

One batch is one transaction that first holds the chain's head row (`SELECT ... FOR UPDATE` on
PostgreSQL, where a second sealer, in this process or another replica, waits for the first to commit
and then reads the head it left; SQLite's BEGIN IMMEDIATE already makes the sealer the one writer),
then gives the oldest unsealed rows the next positions, links each to the one before, and moves the
head. Positions are thus one line whatever order concurrent writers committed their rows in (a row
committed late gets a later position), and the unique index on `seq` refuses any fork.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from bot.domain.audit_chain import GENESIS, ChainRow, link
from storage.schema import audit_events as ae, audit_head

GENESIS_HEAD = GENESIS
BATCH = 2000

_HEAD = sa.select(audit_head.c.seq, audit_head.c.hash).where(audit_head.c.id == 1).with_for_update()
_UNSEALED = (sa.select(ae.c.id, ae.c.request_id, ae.c.type, ae.c.actor, ae.c.data, ae.c.at)
             .where(ae.c.seq.is_(None)).order_by(ae.c.id).limit(sa.bindparam("b_limit")))
_SEAL = (ae.update().where(ae.c.id == sa.bindparam("b_id"))
         .values(seq=sa.bindparam("b_seq"), prev_hash=sa.bindparam("b_prev"), hash=sa.bindparam("b_hash")))
_MOVE = audit_head.update().where(audit_head.c.id == 1).values(seq=sa.bindparam("b_seq"), hash=sa.bindparam("b_hash"))
ANY_UNSEALED = sa.select(ae.c.id).where(ae.c.seq.is_(None)).limit(1)


def row_of(r: Any) -> ChainRow:
    """A selected row with every chain column."""
    return ChainRow(id=r.id, request_id=r.request_id, type=r.type, actor=r.actor, data=r.data or {}, at=r.at,
                    seq=r.seq, prev_hash=r.prev_hash, hash=r.hash)


def _unsealed_row(r: Any) -> ChainRow:
    return ChainRow(id=r.id, request_id=r.request_id, type=r.type, actor=r.actor, data=r.data or {}, at=r.at)


def seal_batch(conn: Connection, limit: int = BATCH) -> int:
    """Seal up to `limit` of the oldest unsealed rows in the caller's transaction; how many it sealed."""
    head = conn.execute(_HEAD).one()
    rows = conn.execute(_UNSEALED, {"b_limit": limit}).all()
    if not rows:
        return 0
    seq, prev = int(head.seq), str(head.hash)
    updates = []
    for r in rows:
        seq += 1
        made = link(prev, _unsealed_row(r), seq)
        updates.append({"b_id": r.id, "b_seq": seq, "b_prev": prev, "b_hash": made})
        prev = made
    conn.execute(_SEAL, updates)
    conn.execute(_MOVE, {"b_seq": seq, "b_hash": prev})
    return len(rows)


def seal_sync(conn: Connection) -> int:
    """Seal every unsealed row, in batches, in the caller's transaction (the migration's)."""
    total = 0
    while (done := seal_batch(conn)) > 0:
        total += done
    return total
