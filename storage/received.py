"""What Slack sent, kept from before its ack until it is handled (`slack_received`; bot/slack/received.py).

`add` writes the rows of the inputs that arrive together in one transaction (group commit,
storage/group_commit.py) and says, for each, whether it is new: the key is Slack's own id for the input
(an event's `event_id`, an interaction's `trigger_id`), so Slack's retry of an event, or the same
payload twice, is stored and handled once. A new row is leased to the process that wrote it.
`done_later` marks a handled row in the next transaction this store writes anyway (the next input's
`add`), or in `flush_done` (the inbox's loop, a stop) if none comes first: a click costs one
transaction, not two. A row not yet marked is still leased to its process, and if the process dies
first, its replay writes nothing new (bot/slack/received.py). `renew` extends the leases of the rows a process is
still working on, and `claim_stale` hands rows whose lease ran out (their process died) to a
process that replays them: one guarded UPDATE per row, so two processes never both take one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from storage.base import Unit
from storage.group_commit import GroupCommit
from storage.schema import slack_received as t
from storage.sql import SqlStore, SqlUnit


@dataclass(eq=False)
class Received:
    """One input from Slack. `id` is set once stored (None: the key was stored before, a duplicate)."""

    key: str
    body: str
    content_type: str
    id: int | None = None
    attempts: int = 0


_RENEW = (t.update().where(t.c.id.in_(sa.bindparam("b_ids", expanding=True)), t.c.done_at.is_(None))
          .values(lease_until=sa.bindparam("b_until")))
_DONE = t.update().where(t.c.id.in_(sa.bindparam("b_ids", expanding=True))).values(done_at=sa.bindparam("b_now"))
_STALE = (sa.select(t.c.id).where(t.c.done_at.is_(None), t.c.lease_until < sa.bindparam("b_now"))
          .order_by(t.c.id).limit(sa.bindparam("b_limit")))
_CLAIM = (t.update().where(t.c.id == sa.bindparam("b_id"), t.c.done_at.is_(None),
                           t.c.lease_until < sa.bindparam("b_now"))
          .values(lease_until=sa.bindparam("b_until"), attempts=t.c.attempts + 1))
_READ = sa.select(t.c.id, t.c.key, t.c.body, t.c.content_type, t.c.attempts).where(
    t.c.id.in_(sa.bindparam("b_ids", expanding=True))).order_by(t.c.id)
_OPEN = (sa.select(t.c.id).where(t.c.done_at.is_(None), t.c.body.like(sa.bindparam("b_pattern"), escape="/"))
         .order_by(t.c.id).limit(sa.bindparam("b_limit")))
_PRUNE = t.delete().where(t.c.done_at < sa.bindparam("b_before"))


def _like_escaped(text: str) -> str:
    return text.replace("/", "//").replace("%", "/%").replace("_", "/_")


class ReceivedStore:
    def __init__(self, store: SqlStore, now: Callable[[], datetime], lease: timedelta,
                 marked: Callable[[Sequence[int]], None] = lambda ids: None) -> None:
        """`marked(ids)`: told once those rows' done marks committed."""
        self.store = store
        self.now = now
        self.lease = lease
        self.marked = marked
        self._adds: GroupCommit[Received] = GroupCommit(self._add)
        self._flushes: GroupCommit[None] = GroupCommit(self._flush)
        self._done: set[int] = set()  # handled, not yet marked

    async def add(self, item: Received) -> bool:
        """Store `item` (committed when this returns); False if its key was stored before."""
        await self._adds.submit(item)
        return item.id is not None

    async def _add(self, items: Sequence[Received]) -> None:
        now = self.now()
        done = sorted(self._done)
        first: dict[str, Received] = {}
        for item in items:
            first.setdefault(item.key, item)  # a key twice in one group: the second is a duplicate
            item.id = None
        rows = [(i.key, i.body, i.content_type) for i in first.values()]
        for row_id, key in await self.store.add_received(rows, now, now + self.lease, done):
            first[key].id = row_id
        self._marked(done)  # committed

    def done_later(self, row_id: int) -> None:
        self._done.add(row_id)

    @property
    def unmarked(self) -> int:
        return len(self._done)

    async def flush_done(self) -> None:
        """Write the done marks still waiting (committed on return)."""
        if self._done:
            await self._flushes.submit(None)

    async def _flush(self, _: Sequence[None]) -> None:
        done = sorted(self._done)
        if done:
            async with self.store.unit() as unit:
                await unit.conn.execute(_DONE, {"b_ids": done, "b_now": self.now()})
            self._marked(done)

    def _marked(self, ids: Sequence[int]) -> None:
        if ids:
            self._done.difference_update(ids)
            self.marked(ids)

    async def renew(self, ids: Sequence[int]) -> None:
        if ids:
            async with self.store.unit() as unit:
                await unit.conn.execute(_RENEW, {"b_ids": list(ids), "b_until": self.now() + self.lease})

    async def claim_stale(self, *, limit: int = 100) -> list[Received]:
        """Rows whose lease ran out, leased to this caller now, oldest first."""
        now = self.now()
        async with self.store.unit() as unit:
            conn = unit.conn
            ids = [r[0] for r in (await conn.execute(_STALE, {"b_now": now, "b_limit": limit})).all()]
            won = [i for i in ids if (await conn.execute(
                _CLAIM, {"b_id": i, "b_now": now, "b_until": now + self.lease})).rowcount == 1]
            if not won:
                return []
            rows = (await conn.execute(_READ, {"b_ids": won})).all()
        return [Received(r.key, r.body, r.content_type, id=r.id, attempts=r.attempts) for r in rows]

    async def open_for(self, request_id: str, unit: Unit | None = None) -> bool:
        """Whether a stored input not yet marked handled names `request_id` (a click, a form) in its raw
        body: the timer sweep leaves that request's timeout until the input is handled. Only open rows
        are read (indexed on `done_at`), so the cost is bounded by what is in flight. `unit`: read inside
        that unit (the timeout's own decision), so an input stored before the decision's time is seen
        (PostgreSQL: the statement's snapshot is taken after it; SQLite: the unit holds the one writer)."""
        params = {"b_pattern": "%" + _like_escaped(request_id) + "%", "b_limit": len(self._done) + 1}
        # One statement for every call (a NOT IN list of this process's unmarked rows made a new statement
        # per length, each prepared and kept on every pooled connection): the unmarked rows are skipped here.
        if unit is not None:
            assert isinstance(unit, SqlUnit), "Slack's inputs live in the SQL store"
            ids = (await unit.conn.execute(_OPEN, params)).scalars().all()
        else:
            async with self.store.engine.connect() as conn:
                ids = (await conn.execute(_OPEN, params)).scalars().all()
        return any(row_id not in self._done for row_id in ids)

    async def prune(self, older_than: timedelta) -> int:
        """Delete rows handled more than `older_than` ago (kept that long to recognise Slack's retries)."""
        async with self.store.unit() as unit:
            return int((await unit.conn.execute(_PRUNE, {"b_before": self.now() - older_than})).rowcount or 0)
