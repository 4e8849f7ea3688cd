"""The decision-signing keys kept in the database (`signing_keys`), shared by every replica.

One row is the current key (slot name `current`); every key rotated out of it stays, renamed `kid:<kid>`,
with the time it stopped being current (`until`), so its public half is still published and old decisions
still verify. `get_or_make` inserts the caller's freshly made key into the `current` slot if the slot is
empty (an insert that does nothing on conflict), then reads it: replicas starting at once each offer one,
the first insert wins, and all of them sign with that one. `rotate` is one transaction guarded on the
current key's id: two operators rotating at once end with one new key, the other told it lost. `retire`
is one guarded update that never touches the current slot. Both leave an audit row (`key_rotated`,
`key_retired`, on `key:<kid>`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from bot.domain.model import AuditEvent
from storage.schema import signing_keys as sk
from storage.sql import SqlStore

SLOT = "current"


@dataclass(frozen=True)
class KeyRow:
    kid: str
    private_key: str
    public_key: str
    current: bool
    since: datetime | None
    until: datetime | None
    retired_at: datetime | None
    endorsed_by: str | None
    endorsement: str | None


_COLUMNS = (sk.c.name, sk.c.kid, sk.c.private_key, sk.c.public_key, sk.c.created_at, sk.c.since, sk.c.until,
            sk.c.retired_at, sk.c.endorsed_by, sk.c.endorsement)


def _row(r: Any) -> KeyRow:
    m = r._mapping
    return KeyRow(kid=str(m["kid"]), private_key=str(m["private_key"]), public_key=str(m["public_key"]),
                  current=m["name"] == SLOT, since=m["since"] or m["created_at"], until=m["until"],
                  retired_at=m["retired_at"], endorsed_by=m["endorsed_by"], endorsement=m["endorsement"])


class SigningKeyStore:
    def __init__(self, store: SqlStore) -> None:
        self.store = store

    async def get_or_make(self, offered: tuple[str, str, str], now: datetime) -> tuple[str, str]:
        """(kid, private seed base64url) of the current key; `offered` (kid, private, public) is stored
        if there is none yet."""
        kid, private, public = offered
        async with self.store.unit() as unit:
            values = {"name": SLOT, "kid": kid, "private_key": private, "public_key": public, "created_at": now,
                      "since": now}
            await unit.conn.execute(unit._insert_ignore(sk, values, "name"))
            row = (await unit.conn.execute(sa.select(sk.c.kid, sk.c.private_key).where(sk.c.name == SLOT))).one()
        return str(row.kid), str(row.private_key)

    async def all(self) -> list[KeyRow]:
        """Every key, the current one first, then the others newest first."""
        async with self.store.engine.connect() as conn:
            rows = [_row(r) for r in (await conn.execute(sa.select(*_COLUMNS))).all()]
        return sorted(rows, key=lambda k: (not k.current, -(k.since.timestamp() if k.since else 0.0)))

    async def rotate(self, old_kid: str, new: KeyRow, now: datetime) -> bool:
        """Make `new` the current key in place of `old_kid` (kept, published, `until` now); False when
        `old_kid` is no longer the current key (another rotation got there first: nothing written)."""
        async with self.store.unit() as unit:
            moved = await unit.conn.execute(
                sk.update().where(sk.c.name == SLOT, sk.c.kid == old_kid).values(name=f"kid:{old_kid}", until=now))
            if moved.rowcount != 1:
                return False
            await unit.conn.execute(sk.insert().values(
                name=SLOT, kid=new.kid, private_key=new.private_key, public_key=new.public_key, created_at=now,
                since=now, endorsed_by=new.endorsed_by, endorsement=new.endorsement))
            await unit.append_audit(AuditEvent(f"key:{new.kid}", "key_rotated", now, None, {"previous": old_kid}))
        return True

    async def retire(self, kid: str, now: datetime) -> str:
        """Withdraw key `kid`: "retired" (done now), "current" (it is the current key: rotate first),
        "already" (retired before) or "unknown"."""
        async with self.store.unit() as unit:
            done = await unit.conn.execute(sk.update().where(sk.c.kid == kid, sk.c.name != SLOT,
                                                             sk.c.retired_at.is_(None)).values(retired_at=now))
            if done.rowcount == 1:
                await unit.append_audit(AuditEvent(f"key:{kid}", "key_retired", now, None, {}))
                return "retired"
            found = (await unit.conn.execute(sa.select(sk.c.name).where(sk.c.kid == kid))).first()
        if found is None:
            return "unknown"
        return "current" if found.name == SLOT else "already"
