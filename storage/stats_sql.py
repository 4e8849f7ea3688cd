"""The statistics' reads and the first-view write (bot/approvals/stats.py).

Every read is one time range of `requests.created_at` (ix_requests_created, or ix_requests_channel_created
for one channel) joined to its decision by primary key, capped at `cap` rows: its cost follows the
requests of that range, never all history.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.stats import StatsRow
from storage.schema import decisions, requests

_COLUMNS = (requests.c.id, requests.c.channel, requests.c.action_name, requests.c.risk, requests.c.status,
            requests.c.created_at, requests.c.first_viewed_at, requests.c.escalation, decisions.c.decided_at,
            decisions.c.via, decisions.c.changes, decisions.c.outcome)


def _row(r: Any) -> StatsRow:
    escalation = r.escalation or {}
    return StatsRow(
        id=r.id, channel=r.channel, tool=r.action_name, tier=r.risk, status=r.status, created_at=r.created_at,
        first_viewed_at=r.first_viewed_at, decided_at=r.decided_at, via=r.via,
        edited=bool(r.changes) and r.outcome == "approved", escalated=int(escalation.get("count", 0)) > 0)


async def read_stats(conn: AsyncConnection, since: datetime, until: datetime, channel: str | None,
                     cap: int) -> tuple[list[StatsRow], bool]:
    """The approval requests created in [since, until) (of `channel`, or all), at most `cap`; and
    whether there were more."""
    stmt = (sa.select(*_COLUMNS).select_from(requests.outerjoin(decisions, decisions.c.request_id == requests.c.id))
            .where(requests.c.created_at >= since, requests.c.created_at < until, requests.c.kind == "approval"))
    if channel is not None:
        stmt = stmt.where(requests.c.channel == channel)
    rows = (await conn.execute(stmt.order_by(requests.c.created_at).limit(cap + 1))).all()
    return [_row(r) for r in rows[:cap]], len(rows) > cap


async def channels_with_requests(conn: AsyncConnection, since: datetime, until: datetime, cap: int) -> list[str]:
    """The channels that had requests in [since, until) (the digest's channels when it names none)."""
    stmt = (sa.select(requests.c.channel).where(requests.c.created_at >= since, requests.c.created_at < until)
            .group_by(requests.c.channel).order_by(requests.c.channel).limit(cap))
    return [r[0] for r in (await conn.execute(stmt)).all()]


async def mark_viewed(conn: AsyncConnection, request_ids: Sequence[str], at: datetime) -> list[StatsRow]:
    """Stamp `first_viewed_at` on those of the pending requests that had none; the ones stamped.
    Not request state: no version bump, no guard (like the card's permalink)."""
    if not request_ids:
        return []
    stmt = (requests.update()
            .where(requests.c.id.in_(list(request_ids)), requests.c.first_viewed_at.is_(None),
                   requests.c.status == "pending")
            .values(first_viewed_at=at)
            .returning(requests.c.id, requests.c.channel, requests.c.action_name, requests.c.risk, requests.c.status,
                       requests.c.created_at))
    rows = (await conn.execute(stmt)).all()
    return [StatsRow(id=r.id, channel=r.channel, tool=r.action_name, tier=r.risk, status=r.status,
                     created_at=r.created_at, first_viewed_at=at) for r in rows]
