"""A user's App Home read (`Store.inbox`): pending requests they approve, those escalated to them, and what
they decided lately, each a page and its total, from the request_people index."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from storage.base import Inbox, InboxEntry
from storage.rows import REQUEST_COLUMNS, REQUEST_JOIN, request_from_row
from storage.schema import decisions, request_people, requests


async def read_inbox(conn: AsyncConnection, user_id: str, *, limit: int, decided_since: datetime) -> Inbox:
    """A user's App Home (`Store.inbox`), read on `conn`: three pages and their totals."""

    def role(name: str) -> Any:
        return sa.exists().where(
            request_people.c.request_id == requests.c.id,
            request_people.c.user_id == user_id,
            request_people.c.role == name,
        )

    pending = requests.c.status == "pending"
    waiting = sa.and_(pending, role("approver"), ~role("escalated"))
    escalated = sa.and_(pending, role("escalated"))
    # An empty approver list means anyone may decide (Service.may_decide).
    can_decide = sa.or_(role("approver"), sa.cast(requests.c.approvers, sa.Text) == "[]")
    mine = sa.and_(decisions.c.decided_by_id == user_id, decisions.c.decided_at >= decided_since)
    oldest = (requests.c.created_at, requests.c.id)

    async def page(where: Any, order: Any) -> tuple[list[Any], int]:
        stmt = sa.select(*REQUEST_COLUMNS, can_decide.label("can_decide")).select_from(REQUEST_JOIN)
        rows = (await conn.execute(stmt.where(where).order_by(*order).limit(limit))).all()
        count = sa.select(sa.func.count()).select_from(REQUEST_JOIN).where(where)
        total = (await conn.execute(count)).scalar()
        return list(rows), int(total or 0)

    waiting_rows, waiting_total = await page(waiting, oldest)
    escalated_rows, escalated_total = await page(escalated, oldest)
    decided_rows, decided_total = await page(mine, (decisions.c.decided_at.desc(), requests.c.id))
    return Inbox(
        waiting=tuple(InboxEntry(request_from_row(r), True) for r in waiting_rows),
        waiting_total=waiting_total,
        escalated=tuple(InboxEntry(request_from_row(r), bool(r.can_decide)) for r in escalated_rows),
        escalated_total=escalated_total,
        decided=tuple(request_from_row(r) for r in decided_rows),
        decided_total=decided_total,
    )
