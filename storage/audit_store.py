"""The audit log as a whole: sealing it into the hash chain, reading it in pages and streaming it.

Reads are keyset-paged (`WHERE seq > ? ORDER BY seq LIMIT n`, or by id), each page on a connection of
its own, so streaming a long log holds one page in memory and no transaction open across pages.
The same SQLAlchemy Core on both engines; the sealing transaction is storage/audit_seal.py's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from bot.domain.audit_chain import Anchor, AuditEntry, AuditFilter, ChainRow
from storage.audit_seal import ANY_UNSEALED, BATCH, row_of, seal_batch
from storage.schema import audit_anchors as aa, audit_events as ae, audit_head, requests, requests_archive as ra
from storage.sql import SqlStore

PAGE = 1000
_COLUMNS = (ae.c.id, ae.c.seq, ae.c.request_id, ae.c.type, ae.c.actor, ae.c.data, ae.c.at, ae.c.prev_hash,
            ae.c.hash)


# A row's tool: its request's, or the archive's once retention took the request (bot/approvals/retention.py).
_TOOL = sa.func.coalesce(requests.c.action_name, ra.c.action_name)


def _where(wanted: AuditFilter) -> list[Any]:
    found: list[Any] = []
    if wanted.since is not None:
        found.append(ae.c.at >= wanted.since)
    if wanted.until is not None:
        found.append(ae.c.at < wanted.until)
    if wanted.tool is not None:
        found.append(_TOOL == wanted.tool)
    if wanted.person is not None:
        found.append(ae.c.actor == wanted.person)
    if wanted.outcome is not None:
        found.append(ae.c.data["outcome"].as_string() == wanted.outcome)
    if wanted.type is not None:
        found.append(ae.c.type == wanted.type)
    return found


class AuditStore:
    def __init__(self, store: SqlStore) -> None:
        self.store = store

    async def seal(self, *, batches: int | None = None) -> int:
        """Seal unsealed rows, one transaction per batch of `BATCH`, until none is left (or `batches` ran);
        how many it sealed. A look on a reader first: with nothing to seal, no write lock is taken."""
        async with self.store.engine.connect() as conn:
            if (await conn.execute(ANY_UNSEALED)).first() is None:
                return 0
        total, rounds = 0, 0
        while batches is None or rounds < batches:
            async with self.store.unit() as unit:
                done = await unit.conn.run_sync(seal_batch, BATCH)
            total, rounds = total + done, rounds + 1
            if done < BATCH:
                break
        return total

    async def head(self) -> tuple[int, str]:
        async with self.store.engine.connect() as conn:
            row = (await conn.execute(sa.select(audit_head.c.seq, audit_head.c.hash))).one()
        return int(row.seq), str(row.hash)

    async def unsealed(self) -> int:
        async with self.store.engine.connect() as conn:
            count = (await conn.execute(sa.select(sa.func.count()).select_from(ae).where(ae.c.seq.is_(None)))).scalar()
        return int(count or 0)

    async def chain(self, *, since: datetime | None = None, page: int = PAGE) -> AsyncIterator[ChainRow]:
        """Sealed rows in chain order (`since`: only those at or after it), a page at a time."""
        after = 0
        while True:
            stmt = sa.select(*_COLUMNS).where(ae.c.seq > after).order_by(ae.c.seq).limit(page)
            if since is not None:
                stmt = stmt.where(ae.c.at >= since)
            async with self.store.engine.connect() as conn:
                rows = [row_of(r) for r in (await conn.execute(stmt)).all()]
            for row in rows:
                yield row
            if len(rows) < page:
                return
            assert rows[-1].seq is not None
            after = rows[-1].seq

    async def page(self, wanted: AuditFilter, *, after_id: int, limit: int) -> list[AuditEntry]:
        """Rows matching `wanted` with an id above `after_id`, oldest first, at most `limit`."""
        if wanted.since is not None:
            # Rows are read in id order: start at the first row in the time range, not at the log's first
            # row (a page since an hour ago walked the whole log). `id + 0`, not `id`: min(id) takes both
            # engines' min/max shortcut, walking the primary key from its start, not ix_audit_events_at.
            first = sa.select(sa.func.min(ae.c.id + 0)).where(ae.c.at >= wanted.since)
            async with self.store.engine.connect() as conn:
                found = (await conn.execute(first)).scalar()
            if found is None:
                return []
            after_id = max(after_id, int(found) - 1)
        joined = ae.outerjoin(requests, requests.c.id == ae.c.request_id).outerjoin(ra, ra.c.id == ae.c.request_id)
        stmt = (sa.select(*_COLUMNS, _TOOL.label("action_name")).select_from(joined)
                .where(ae.c.id > after_id, *_where(wanted)).order_by(ae.c.id).limit(limit))
        async with self.store.engine.connect() as conn:
            rows = (await conn.execute(stmt)).all()
        return [AuditEntry(row_of(r), r.action_name) for r in rows]

    async def export(self, wanted: AuditFilter, *, page: int = PAGE) -> AsyncIterator[AuditEntry]:
        """Every row matching `wanted`, oldest first, a page at a time (bounded memory however many)."""
        after = 0
        while True:
            rows = await self.page(wanted, after_id=after, limit=page)
            for row in rows:
                yield row
            if len(rows) < page:
                return
            after = rows[-1].row.id

    async def add_anchor(self, anchor: Anchor) -> bool:
        """Keep `anchor`; False when that position was anchored already (by another replica: one row each)."""
        values = {"seq": anchor.seq, "hash": anchor.hash, "at": anchor.at, "kid": anchor.kid, "sig": anchor.sig}
        async with self.store.unit() as unit:
            return bool(await unit._inserted(unit._insert_ignore(aa, values, "seq")))

    async def latest_anchor(self) -> Anchor | None:
        async with self.store.engine.connect() as conn:
            r = (await conn.execute(sa.select(aa).order_by(aa.c.seq.desc()).limit(1))).first()
        return None if r is None else Anchor(int(r.seq), str(r.hash), r.at, str(r.kid), str(r.sig))
