"""The SQL store's hot statements, built once.

A statement object memoizes its cache key, so executing the same one with new parameters skips
building and hashing a fresh statement per call (bench.all --profile showed cache-key generation and
statement construction at 5-8 % of the server's busy samples).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from storage.rows import SELECT_REQUEST
from storage.schema import audit_events, decisions, home_users, outbox, request_people, requests

NOTIFY_CHANNEL = "signoff_requests"


def due_requests_statement(now: datetime, limit: int, *, postgres: bool) -> Any:
    """The pending requests due at `now`, whole rows, oldest due first (the timer sweep's claim).

    One statement: a range scan on ix_requests_next_due_at reads the due rows only, however many
    are pending (bench/sweep.py prints the plan). PostgreSQL locks the requests rows it returns
    and skips rows another transaction holds, so replicas sweeping at once take different rows.
    """
    due = (
        SELECT_REQUEST
        .where(requests.c.next_due_at <= now, requests.c.status == "pending")
        .order_by(requests.c.next_due_at)
        .limit(limit)
    )
    return due.with_for_update(skip_locked=True, of=requests) if postgres else due


STORE_CARD = (
    requests.update()
    .where(requests.c.id == sa.bindparam("rid"), requests.c.card_ts.is_(None))
    .values(card_channel=sa.bindparam("b_channel"), card_ts=sa.bindparam("b_ts"), updated_at=sa.bindparam("b_now"),
            version=requests.c.version + 1)
)


# Hot statements built once: a statement object memoizes its cache key, so executing the same one with
# new parameters skips building and hashing a fresh statement per call (bench.all --profile showed
# cache-key generation and statement construction at 5-8 % of the server's busy samples).
INSERT_AUDIT = audit_events.insert()
INSERT_DECISION = decisions.insert()
INSERT_REQUEST = requests.insert()
OUTBOX_DONE = (
    outbox.update().where(outbox.c.id == sa.bindparam("b_id"))
    .values(status="done", done_at=sa.bindparam("b_now"), lease_until=None)
)
ENQUEUE = {
    True: pg_insert(outbox).on_conflict_do_nothing(index_elements=["dedupe_key"]),
    False: sqlite_insert(outbox).on_conflict_do_nothing(index_elements=["dedupe_key"]),
}
ADD_PEOPLE = {
    True: pg_insert(request_people).on_conflict_do_nothing(index_elements=["request_id", "user_id", "role"]),
    False: sqlite_insert(request_people).on_conflict_do_nothing(index_elements=["request_id", "user_id", "role"]),
}
PEOPLE_OF = sa.select(request_people.c.user_id).where(request_people.c.request_id == sa.bindparam("b_id"))
HOME_USERS_OF = sa.select(home_users.c.user_id).where(home_users.c.user_id.in_(PEOPLE_OF))
HOME_USERS_OF_AND = sa.select(home_users.c.user_id).where(sa.or_(
    home_users.c.user_id.in_(PEOPLE_OF), home_users.c.user_id.in_(sa.bindparam("b_also", expanding=True))))


# Written out, not bound: the partial index ix_outbox_pending (migration 0020) is used only for a predicate
# the planner sees. On the status index alone, SQLite with statistics (ANALYZE: every row of a long
# history is 'done') scanned the whole table in id order for the claim: 21 ms at 200,000 items.
PENDING_ITEM = sa.text("outbox.status = 'pending'")


def claim_outbox_statement(*, postgres: bool) -> sa.UpdateBase:
    """Due items, oldest first, up to `b_limit`, leased until `b_lease` (built once: it runs on every wake-up)."""
    now = sa.bindparam("b_now", type_=outbox.c.next_attempt_at.type)
    due = (
        sa.select(outbox.c.id)
        .where(
            PENDING_ITEM,
            outbox.c.next_attempt_at <= now,
            sa.or_(outbox.c.lease_until.is_(None), outbox.c.lease_until <= now),
        )
        .order_by(outbox.c.id)
        .limit(sa.bindparam("b_limit", type_=sa.Integer))
    )
    if postgres:
        due = due.with_for_update(skip_locked=True)
    return (
        outbox.update()
        .where(outbox.c.id.in_(due.scalar_subquery()))
        .values(attempts=outbox.c.attempts + 1, lease_until=sa.bindparam("b_lease", type_=outbox.c.lease_until.type))
        .returning(*outbox.c)
    )


CLAIM_OUTBOX = {postgres: claim_outbox_statement(postgres=postgres) for postgres in (False, True)}
NEXT_OUTBOX_DUE = sa.select(sa.func.min(sa.case(
    (outbox.c.lease_until > outbox.c.next_attempt_at, outbox.c.lease_until), else_=outbox.c.next_attempt_at,
))).where(PENDING_ITEM)
NOTIFY = sa.select(sa.func.pg_notify(NOTIFY_CHANNEL, sa.bindparam("b_id", type_=sa.String)))

UPDATE_REQUESTS: dict[tuple[str, ...], Any] = {}


def update_requests_statement(names: tuple[str, ...]) -> Any:
    """The guarded write of `update_request` with bound parameters only, for executemany (built once)."""
    stmt = UPDATE_REQUESTS.get(names)
    if stmt is None:
        stmt = UPDATE_REQUESTS[names] = (
            requests.update()
            .where(requests.c.id == sa.bindparam("b_id"), requests.c.version == sa.bindparam("b_expected"))
            .values(version=sa.bindparam("b_version"), **{n: sa.bindparam(f"b_{n}") for n in names})
        )
    return stmt

# A token's pending requests (SIGNOFF_MAX_PENDING_PER_TOKEN): on the partial index ix_requests_owner_pending.
COUNT_PENDING = sa.select(sa.func.count()).select_from(requests).where(
    # The status written out, not bound: a partial index is used only for a predicate the planner sees.
    requests.c.owner == sa.bindparam("b_owner"), sa.text("requests.status = 'pending'"))
# The same at the driver level (the SQLite reader's and asyncpg's placeholders).
COUNT_PENDING_SQL = {mark: f"SELECT count(*) FROM requests WHERE owner = {mark} AND status = 'pending'"
                     for mark in ("?", "$1")}
