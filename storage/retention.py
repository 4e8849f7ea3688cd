"""Retention's storage: decided requests older than a cutoff moved out of the hot tables, a batch per
transaction, and the claim that lets one replica at a time do it.

A batch is one unit (SQLite: one short write lock; PostgreSQL: one transaction whose candidate rows are
locked `FOR UPDATE SKIP LOCKED`): read up to `limit` ids of requests that are decided (not pending),
were created and last written before the cutoff and have nothing due, keep a line of each in
`requests_archive`, delete their decision, votes and people rows, then the requests, the delete
guarded on the same conditions. Delivered (or dead) outbox items and handled Slack inputs older than
the cutoff go in batches of their own, read on their status-and-time indexes (the outbox has no index
by request: deleting a request's items by its id would scan the whole outbox, every batch). Audit rows are never touched: the hash chain covers them.

The same SQLAlchemy Core on both engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from storage.schema import (
    decisions,
    job_claims,
    outbox,
    request_people,
    requests,
    requests_archive,
    slack_received,
    votes,
)
from storage.sql import SqlStore


def _at(value: datetime, column: sa.Column[Any]) -> Any:
    return sa.literal(value, column.type)  # typed: SQLite compares the stored text form


def _old_decided(cutoff: datetime) -> list[Any]:
    return [requests.c.created_at < _at(cutoff, requests.c.created_at),
            requests.c.updated_at < _at(cutoff, requests.c.updated_at),
            requests.c.status != "pending", requests.c.next_due_at.is_(None)]


class RetentionStore:
    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.postgres = store.dialect == "postgresql"

    async def claim(self, name: str, now: datetime, until: datetime, owner: str) -> bool:
        """Whether this caller now holds job `name` (due at or before `now`) until `until`."""
        stmt = (job_claims.update()
                .where(job_claims.c.name == name, job_claims.c.due_at <= _at(now, job_claims.c.due_at))
                .values(due_at=until, owner=owner))
        async with self.store.unit() as unit:
            return bool((await unit.conn.execute(stmt)).rowcount == 1)

    async def release(self, name: str, owner: str, next_due: datetime) -> None:
        """Job `name` due again at `next_due`, if `owner` still holds it."""
        stmt = (job_claims.update().where(job_claims.c.name == name, job_claims.c.owner == owner)
                .values(due_at=next_due))
        async with self.store.unit() as unit:
            await unit.conn.execute(stmt)

    async def archive_batch(self, cutoff: datetime, now: datetime, *, limit: int) -> int:
        """Archive up to `limit` decided requests older than `cutoff`; how many."""
        pick = (sa.select(requests.c.id).where(*_old_decided(cutoff))
                .order_by(requests.c.created_at).limit(limit))
        if self.postgres:
            pick = pick.with_for_update(skip_locked=True)
        async with self.store.unit() as unit:
            conn = unit.conn
            ids = [r.id for r in (await conn.execute(pick)).all()]
            if not ids:
                return 0
            kept = sa.select(
                requests.c.id, requests.c.kind, requests.c.status, requests.c.action_name, requests.c.channel,
                requests.c.owner, requests.c.created_at, requests.c.updated_at,
                sa.literal(now, requests_archive.c.archived_at.type),
            ).where(requests.c.id.in_(ids), *_old_decided(cutoff))
            names = ["id", "kind", "status", "action_name", "channel", "owner", "created_at", "decided_at",
                     "archived_at"]
            await conn.execute(requests_archive.insert().from_select(names, kept))
            for table in (decisions, votes, request_people):  # each keyed by request id first
                await conn.execute(table.delete().where(table.c.request_id.in_(ids)))
            done = await conn.execute(requests.delete().where(requests.c.id.in_(ids), *_old_decided(cutoff)))
            return int(done.rowcount)

    async def forget_delivered(self, cutoff: datetime, *, limit: int) -> int:
        """Delete up to `limit` delivered (or dead) outbox items and handled Slack inputs older than `cutoff`."""
        old_items = (sa.select(outbox.c.id).where(outbox.c.status.in_(("done", "dead")),
                                                  outbox.c.next_attempt_at < _at(cutoff, outbox.c.next_attempt_at),
                                                  outbox.c.created_at < _at(cutoff, outbox.c.created_at))
                     .limit(limit))
        old_inputs = (sa.select(slack_received.c.id)
                      .where(slack_received.c.done_at < _at(cutoff, slack_received.c.received_at)).limit(limit))
        gone = 0
        async with self.store.unit() as unit:
            for table, pick in ((outbox, old_items), (slack_received, old_inputs)):
                ids: Sequence[Any] = [r.id for r in (await unit.conn.execute(pick)).all()]
                if ids:
                    gone += int((await unit.conn.execute(table.delete().where(table.c.id.in_(ids)))).rowcount)
        return gone

    async def archived(self, request_id: str) -> tuple[str, str | None, datetime] | None:
        """(outcome, owner, when archived) of request `request_id`, or None if it was never archived."""
        a = requests_archive.c
        stmt = sa.select(a.status, a.owner, a.archived_at).where(a.id == request_id)
        async with self.store.engine.connect() as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else (str(row.status), row.owner, row.archived_at)
