"""Storage of remembered grants and delegations, on the engines (and SQLite writer lock) of a `SqlStore`.

Submit reads the live grants of one tool each time (no cache), so a revocation committed by
any process stops matching for the very next request. Revocation is a guarded write
(`WHERE revoked_at IS NULL`): two people revoking at once both see it revoked, once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.grants import ALLOW, DENY, Delegation, Grant, Scope, match_from_json
from bot.domain.model import AuditEvent
from storage.sqlite import fast as sqlite_fast
from storage.base import Unit
from storage.grants_schema import delegations, grants, suggestion_dismissals
from storage.schema import requests
from storage.sql import SqlStore, SqlUnit


def _grant(row: Any) -> Grant:
    return Grant(
        id=row.id, tool=row.tool, match=match_from_json(row.match), scope=Scope(row.scope),
        scope_value=row.scope_value, created_by=row.created_by, created_at=row.created_at,
        expires_at=row.expires_at, revoked_at=row.revoked_at, revoked_by=row.revoked_by, request_id=row.request_id,
        any_other_params=bool(row.any_other_params), effect=DENY if row.effect == DENY else ALLOW,
    )


def _values(grant: Grant) -> dict[str, Any]:
    return dict(id=grant.id, tool=grant.tool, match=grant.match_json(), scope=grant.scope.value,
                scope_value=grant.scope_value, created_by=grant.created_by, created_at=grant.created_at,
                expires_at=grant.expires_at, request_id=grant.request_id, any_other_params=grant.any_other_params,
                effect=grant.effect)


def _delegation(row: Any) -> Delegation:
    return Delegation(user=row.user_id, delegate=row.delegate, starts_at=row.starts_at, until=row.until,
                      ended_at=row.ended_at, id=row.id)


GRANT_STAMP = sa.select(sa.func.count(), sa.func.max(grants.c.created_at), sa.func.max(grants.c.revoked_at),
                   sa.func.count(grants.c.revoked_at)).where(grants.c.tool == sa.bindparam("b_tool"))

# `away` inserts a row (count and max id rise), `back` and `away` end rows (ended_at counted); nothing deletes.
DELEGATION_STAMP = sa.select(sa.func.count(), sa.func.max(delegations.c.id), sa.func.count(delegations.c.ended_at))


def _live(now: datetime) -> Any:
    return sa.and_(grants.c.revoked_at.is_(None),
                   sa.or_(grants.c.expires_at.is_(None), grants.c.expires_at > now))


def _insert_new(unit: Unit, table: sa.Table, values: dict[str, Any], keys: list[str]) -> Any:
    """INSERT ... ON CONFLICT (keys) DO NOTHING, as the unit's engine writes it (rowcount 0: it was there)."""
    assert isinstance(unit, SqlUnit), "grants live in the SQL store"
    return unit._insert_ignore_keys(table, values, keys)


def _conn(unit: Unit) -> AsyncConnection:
    assert isinstance(unit, SqlUnit), "grants live in the SQL store"
    return unit.conn


async def _stamp(unit: Unit, stmt: Any, params: dict[str, Any]) -> tuple[Any, ...]:
    """A stamp's one row, read in the unit (SQLite: driver SQL, as every submit reads two of them)."""
    conn = _conn(unit)
    if conn.dialect.name == "sqlite":
        return await sqlite_fast.one(conn, stmt, params)
    return tuple((await conn.execute(stmt, params)).one())


class GrantStore:
    """Grants and delegations. Writes that belong to a decision take the caller's `Unit`."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store

    async def _all(self, stmt: Any) -> list[Any]:
        async with self.store.engine.connect() as conn:
            return list((await conn.execute(stmt)).all())

    # -- grants -----------------------------------------------------------------------------

    async def add(self, unit: Unit, grant: Grant) -> None:
        """Insert `grant` and its audit row in the caller's transaction."""
        await self.add_in(unit, grant)

    @staticmethod
    async def add_in(unit: Unit, grant: Grant) -> None:
        """`add`, for a caller that holds a unit but no GrantStore (a decision's own writes)."""
        await _conn(unit).execute(grants.insert().values(**_values(grant)))
        await GrantStore._audit_created(unit, grant)

    @staticmethod
    async def _audit_created(unit: Unit, grant: Grant) -> None:
        await unit.append_audit(AuditEvent(grant.id, "grant_created", grant.created_at, grant.created_by, {
            "tool": grant.tool, "match": grant.match_json(), "scope": grant.scope.value,
            "scope_value": grant.scope_value, "expires_at": grant.expires_at.isoformat() if grant.expires_at else None,
            "request_id": grant.request_id,
            **({"any_other_params": True} if grant.any_other_params else {}),
            **({"effect": DENY} if grant.effect == DENY else {}),
        }))

    async def add_first(self, prefix: str, make: Callable[[str], Grant], now: datetime,
                        audit: dict[str, Any]) -> tuple[Grant, bool]:
        """The live grant whose id starts with `prefix`, or a new one: (grant, True if this call made it).

        The new grant's id is `prefix` + how many grants ever had it (a revoked or expired one is not
        reused), inserted only if absent: two racing calls both pick the same id and one insert
        finds the other's row (PostgreSQL waits for it to commit), so one grant is made, once. Its
        `grant_created` audit row (actor: its maker) is followed by `suggestion_accepted` with `audit`."""
        async with self.store.unit() as unit:
            conn = _conn(unit)
            rows = [_grant(r) for r in (await conn.execute(
                sa.select(grants).where(grants.c.id.startswith(prefix, autoescape=True)))).all()]
            live = [g for g in rows if g.active(now)]
            if live:
                return live[0], False
            grant = make(f"{prefix}{len(rows)}")
            inserted = await conn.execute(_insert_new(unit, grants, _values(grant), ["id"]))
            if inserted.rowcount == 1:
                await self._audit_created(unit, grant)
                await unit.append_audit(AuditEvent(grant.id, "suggestion_accepted", now, grant.created_by, audit))
                return grant, True
        won = await self.get(grant.id)
        assert won is not None, "a conflicting insert left no row"
        return won, False

    async def dismiss(self, user: str, key_hash: str, now: datetime) -> bool:
        """Hide a suggestion for `user`; True the first time."""
        async with self.store.unit() as unit:
            conn = _conn(unit)
            result = await conn.execute(_insert_new(unit, suggestion_dismissals, {
                "user_id": user, "key_hash": key_hash, "dismissed_at": now}, ["user_id", "key_hash"]))
            if result.rowcount == 1:
                await unit.append_audit(AuditEvent(f"suggestion:{key_hash[:16]}", "suggestion_dismissed", now, user, {}))
            return bool(result.rowcount == 1)

    async def dismissed(self, user: str) -> set[str]:
        """The key hashes of the suggestions `user` dismissed."""
        rows = await self._all(sa.select(suggestion_dismissals.c.key_hash)
                               .where(suggestion_dismissals.c.user_id == user))
        return {str(r.key_hash) for r in rows}

    async def with_prefix(self, prefixes: Iterable[str], now: datetime) -> set[str]:
        """Which of `prefixes` some live grant's id starts with (the suggestions already accepted)."""
        wanted = list(dict.fromkeys(prefixes))
        if not wanted:
            return set()
        rows = await self._all(sa.select(grants).where(
            _live(now), sa.or_(*(grants.c.id.startswith(p, autoescape=True) for p in wanted))))
        return {p for p in wanted for r in rows if str(r.id).startswith(p)}

    async def for_tool(self, tool: str, now: datetime) -> list[Grant]:
        """The live (not revoked, not expired) grants of `tool`, oldest first."""
        stmt = sa.select(grants).where(grants.c.tool == tool, _live(now)).order_by(grants.c.created_at, grants.c.id)
        return [_grant(r) for r in await self._all(stmt)]

    async def stamp(self, tool: str) -> tuple[Any, ...]:
        """What changes whenever `tool`'s grants change (one made, one revoked): a cache key."""
        async with self.store.engine.connect() as conn:  # read on every submit: a statement built once
            return tuple((await conn.execute(GRANT_STAMP, {"b_tool": tool})).one())

    async def stamp_in(self, unit: Unit, tool: str) -> tuple[Any, ...]:
        """`stamp(tool)` read in the caller's transaction (PolicyGate verifies a cached index there)."""
        return await _stamp(unit, GRANT_STAMP, {"b_tool": tool})

    async def live(self, now: datetime, *, limit: int = 100) -> list[Grant]:
        stmt = sa.select(grants).where(_live(now)).order_by(grants.c.created_at.desc(), grants.c.id).limit(limit)
        return [_grant(r) for r in await self._all(stmt)]

    async def live_with_origins(self, now: datetime, *, limit: int, owner: str | None = None
                                ) -> list[tuple[Grant, tuple[str, ...]]]:
        """Live grants, newest first, each with the approvers of the request it was made on (() when
        that request listed none or is gone): who may see and revoke it (bot.approvals.grants). `owner`: only
        grants made on requests of that API token (`requests.owner`), in the query, before the limit."""
        stmt = sa.select(grants, requests.c.approvers.label("origin_approvers")).select_from(
            grants.outerjoin(requests, requests.c.id == grants.c.request_id)).where(_live(now))
        if owner is not None:
            stmt = stmt.where(requests.c.owner == owner)
        stmt = stmt.order_by(grants.c.created_at.desc(), grants.c.id).limit(limit)
        return [(_grant(r), tuple(str(a) for a in r.origin_approvers or ())) for r in await self._all(stmt)]

    async def origin_approvers(self, grant: Grant) -> tuple[str, ...]:
        """The approvers of the request `grant` was made on (() when it listed none or is gone)."""
        if grant.request_id is None:
            return ()
        rows = await self._all(sa.select(requests.c.approvers).where(requests.c.id == grant.request_id))
        return tuple(str(a) for a in rows[0].approvers or ()) if rows else ()

    async def get(self, grant_id: str) -> Grant | None:
        rows = await self._all(sa.select(grants).where(grants.c.id == grant_id))
        return _grant(rows[0]) if rows else None

    async def revoke(self, grant_id: str, by: str, now: datetime) -> bool:
        """True if this call revoked it; False if it was already revoked (or does not exist)."""
        async with self.store.unit() as unit:
            result = await _conn(unit).execute(
                grants.update().where(grants.c.id == grant_id, grants.c.revoked_at.is_(None))
                .values(revoked_at=now, revoked_by=by[:40]))  # the column's width; the audit keeps it whole
            if result.rowcount != 1:
                return False
            await unit.append_audit(AuditEvent(grant_id, "grant_revoked", now, by[:200], {}))
        return True

    # -- delegations --------------------------------------------------------------------------

    async def delegations_of(self, users: Iterable[str], now: datetime) -> list[Delegation]:
        """Delegations of any of `users` that have not ended or run out (the caller checks windows)."""
        wanted = list(dict.fromkeys(users))
        if not wanted:
            return []
        stmt = (sa.select(delegations)
                .where(delegations.c.user_id.in_(wanted), delegations.c.ended_at.is_(None),
                       sa.or_(delegations.c.until.is_(None), delegations.c.until > now))
                .order_by(delegations.c.id.desc()))
        return [_delegation(r) for r in await self._all(stmt)]

    async def live_delegations(self, now: datetime) -> tuple[tuple[Any, ...], list[Delegation]]:
        """(stamp, every delegation that has not ended or run out at `now`, newest first): what the gate
        caches. The stamp is read first: a change landing between the two reads moves the stamp after it
        was taken, so the copy is found stale at its first verification (never kept)."""
        async with self.store.engine.connect() as conn:
            stamp = tuple((await conn.execute(DELEGATION_STAMP)).one())
            rows = (await conn.execute(sa.select(delegations).where(
                delegations.c.ended_at.is_(None), sa.or_(delegations.c.until.is_(None), delegations.c.until > now))
                .order_by(delegations.c.id.desc()))).all()
        return stamp, [_delegation(r) for r in rows]

    async def delegation_stamp_in(self, unit: Unit) -> tuple[Any, ...]:
        """What changes whenever any delegation starts or ends (`away`, `back`), read in the caller's
        transaction (PolicyGate verifies its cached delegations there). Running out (`until`) needs no
        stamp: the reader checks it against its own `now`."""
        return await _stamp(unit, DELEGATION_STAMP, {})

    async def delegations_to(self, delegate: str, now: datetime) -> list[Delegation]:
        stmt = (sa.select(delegations)
                .where(delegations.c.delegate == delegate, delegations.c.ended_at.is_(None),
                       sa.or_(delegations.c.until.is_(None), delegations.c.until > now))
                .order_by(delegations.c.id.desc()))
        return [_delegation(r) for r in await self._all(stmt)]

    async def away(self, user: str, delegate: str, until: datetime | None, now: datetime) -> Delegation:
        """Start a delegation (ending any the user had running): one unit, so at most one is live."""
        async with self.store.unit() as unit:
            conn = _conn(unit)
            await conn.execute(delegations.update().where(delegations.c.user_id == user,
                                                          delegations.c.ended_at.is_(None)).values(ended_at=now))
            result = await conn.execute(delegations.insert().values(
                user_id=user, delegate=delegate, starts_at=now, until=until, created_at=now))
            await unit.append_audit(AuditEvent(f"away:{user}", "away", now, user, {
                "delegate": delegate, "until": until.isoformat() if until else None}))
        key = result.inserted_primary_key
        return Delegation(user, delegate, now, until, None, int(key[0]) if key else None)

    async def back(self, user: str, now: datetime) -> int:
        """End the user's delegations; how many were running."""
        async with self.store.unit() as unit:
            result = await _conn(unit).execute(
                delegations.update().where(delegations.c.user_id == user, delegations.c.ended_at.is_(None),
                                           sa.or_(delegations.c.until.is_(None), delegations.c.until > now))
                .values(ended_at=now))
            if result.rowcount:
                await unit.append_audit(AuditEvent(f"away:{user}", "back", now, user, {}))
        return int(result.rowcount)
