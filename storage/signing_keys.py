"""The decision-signing key kept in the database (`signing_keys`), shared by every replica.

`get_or_make` inserts the caller's freshly made key into the "current" slot if the slot is empty (an
insert that does nothing on conflict), then reads the slot: replicas starting at once each offer one,
the first insert wins, and all of them sign with that one.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from storage.schema import signing_keys as sk
from storage.sql import SqlStore

SLOT = "current"


class SigningKeyStore:
    def __init__(self, store: SqlStore) -> None:
        self.store = store

    async def get_or_make(self, offered: tuple[str, str, str], now: datetime) -> tuple[str, str]:
        """(kid, private seed base64url) of the current key; `offered` (kid, private, public) is stored
        if there is none yet."""
        kid, private, public = offered
        async with self.store.unit() as unit:
            values = {"name": SLOT, "kid": kid, "private_key": private, "public_key": public, "created_at": now}
            await unit.conn.execute(unit._insert_ignore(sk, values, "name"))
            row = (await unit.conn.execute(sa.select(sk.c.kid, sk.c.private_key).where(sk.c.name == SLOT))).one()
        return str(row.kid), str(row.private_key)
