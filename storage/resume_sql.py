"""Resume claims in SQL (bot/domain/resumes.py), through SQLAlchemy Core: the same on both engines.

Every change is one statement guarded on what the claim must still be, so two callers at once get
one outcome, with no read before the write:
- claim: an INSERT that does nothing on conflict (a new key: the first insert wins; PostgreSQL makes
  a concurrent insert of the same key wait for it, SQLite has one writer), else an UPDATE guarded on
  `ResumeClaim.may_take` (state `resuming`, and this owner already, or the lease ran out by `now`).
  PostgreSQL re-checks an UPDATE's WHERE on the row a concurrent winner just wrote, so the second
  taker sees the first one's fresh lease and writes nothing. The row is then read in the same
  transaction: the holder's, to tell a loser who has it.
- renew and finish: an UPDATE guarded on the owner and state `resuming`.
Times are the caller's `now` (the server's clock), never the database's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.resumes import ResumeClaim, ResumeState
from storage.schema import resume_claims as rc


class _Unit(Protocol):
    """What of storage.sql.SqlUnit this module uses (it is imported by storage.sql: no cycle)."""

    conn: AsyncConnection

    def _insert_ignore_keys(self, table: sa.Table, values: dict[str, Any], keys: list[str]) -> Any: ...


_ONE = sa.and_(rc.c.token == sa.bindparam("b_token"), rc.c.key == sa.bindparam("b_key"))
_HELD = sa.and_(_ONE, rc.c.state == ResumeState.RESUMING.value, rc.c.owner == sa.bindparam("b_owner"))
_TAKE = rc.update().where(
    _ONE, rc.c.state == ResumeState.RESUMING.value,
    sa.or_(rc.c.owner == sa.bindparam("b_owner"), rc.c.lease_until <= sa.bindparam("b_now")),
).values(owner=sa.bindparam("b_owner"), lease_until=sa.bindparam("b_until"), updated_at=sa.bindparam("b_now"))
_RENEW = rc.update().where(_HELD).values(lease_until=sa.bindparam("b_until"), updated_at=sa.bindparam("b_now"))
_FINISH = rc.update().where(_HELD).values(state=sa.bindparam("b_state"), error=sa.bindparam("b_error"),
                                          updated_at=sa.bindparam("b_now"))
_GET = sa.select(rc).where(_ONE)


def _claim(row: Any) -> ResumeClaim:
    return ResumeClaim(token=row.token, key=row.key, owner=row.owner, state=ResumeState(row.state),
                       lease_until=row.lease_until, created_at=row.created_at, updated_at=row.updated_at,
                       request_ids=tuple(str(r) for r in row.request_ids or ()), error=row.error)


async def get(conn: AsyncConnection, token: str, key: str) -> ResumeClaim | None:
    row = (await conn.execute(_GET, {"b_token": token, "b_key": key})).first()
    return _claim(row) if row is not None else None


async def claim(unit: _Unit, wanted: ResumeClaim, now: datetime) -> tuple[bool, ResumeClaim]:
    """(True, the row) if `wanted.owner` holds `wanted.key` now; (False, the holder's row) if not."""
    values = {"token": wanted.token, "key": wanted.key, "owner": wanted.owner, "state": wanted.state.value,
              "lease_until": wanted.lease_until, "request_ids": list(wanted.request_ids), "error": None,
              "created_at": now, "updated_at": now}
    inserted = (await unit.conn.execute(unit._insert_ignore_keys(rc, values, ["token", "key"]))).rowcount == 1
    if inserted:
        return True, wanted
    params = {"b_token": wanted.token, "b_key": wanted.key, "b_owner": wanted.owner, "b_now": now,
              "b_until": wanted.lease_until}
    took = (await unit.conn.execute(_TAKE, params)).rowcount == 1
    found = await get(unit.conn, wanted.token, wanted.key)
    assert found is not None  # it conflicted with this row, and nothing deletes claims
    return took, found


async def renew(unit: _Unit, token: str, key: str, owner: str, until: datetime,
                now: datetime) -> tuple[bool, ResumeClaim | None]:
    params = {"b_token": token, "b_key": key, "b_owner": owner, "b_until": until, "b_now": now}
    renewed = (await unit.conn.execute(_RENEW, params)).rowcount == 1
    return renewed, await get(unit.conn, token, key)


async def finish(unit: _Unit, token: str, key: str, owner: str, state: ResumeState, error: str | None,
                 now: datetime) -> tuple[bool, ResumeClaim | None]:
    params = {"b_token": token, "b_key": key, "b_owner": owner, "b_state": state.value, "b_error": error,
              "b_now": now}
    finished = (await unit.conn.execute(_FINISH, params)).rowcount == 1
    return finished, await get(unit.conn, token, key)
