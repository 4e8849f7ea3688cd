"""The audit log's use cases: seal it into the hash chain, prove the chain, page and export it.

Sealing runs beside the timers' sweep in every process (and before `verify`/`export`); rows appended
by the approval path are sealed on the next sweep, so until then a row is in the log but not yet in the
chain (`AuditReport.unsealed`). See bot/domain/audit_chain.py for what the chain proves.

Anchoring runs after sealing, at most once per `SIGNOFF_AUDIT_ANCHOR_SECONDS` in each process: the head,
if it moved since the last anchor, is signed with the current decision key and kept (`audit_anchors`, one
row per position: replicas anchoring the same head keep one). `verify(anchor=...)` then proves the chain
still passes through an anchor taken earlier (bot/domain/audit_chain.py).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime

from bot.approvals.keys import Signer
from bot.domain.audit_chain import Anchor, AuditEntry, AuditFilter, Break, ChainCheck
from bot.domain.signatures import anchor_bytes
from bot.domain.values import iso
from storage.audit_store import AuditStore
from storage.sql import SqlStore


@dataclass(frozen=True)
class AuditReport:
    """What `verify` found: rows checked, the head (position, hash), the first break if any."""

    checked: int
    head_seq: int
    head_hash: str
    broken: Break | None
    unsealed: int
    anchor: Anchor | None = None

    @property
    def ok(self) -> bool:
        return self.broken is None

    def words(self) -> str:
        if self.broken is not None:
            return f"audit chain BROKEN at {self.broken.words()} ({self.checked} rows before it are intact)"
        pending = f"; {self.unsealed} newer rows not sealed yet" if self.unsealed else ""
        through = (f"; it extends the anchor of {iso(self.anchor.at)} (position {self.anchor.seq}, "
                   f"hash {self.anchor.hash[:16]}...)" if self.anchor is not None else "")
        return (f"audit chain intact: {self.checked} rows, head at position {self.head_seq}, "
                f"hash {self.head_hash}{pending}{through}")


class AuditLog:
    def __init__(self, store: SqlStore, *, anchor_every: float = 3600.0) -> None:
        self._rows = AuditStore(store)
        self.anchor_every = anchor_every
        self._anchored_at: float | None = None  # monotonic: when this process last looked to anchor

    async def seal(self) -> int:
        """Seal every row not yet in the chain; how many."""
        return await self._rows.seal()

    async def verify(self, *, seal: bool = True, anchor: Anchor | None = None) -> AuditReport:
        """Walk the whole chain in position order (a page at a time) and say where it first breaks; with
        `anchor` (its signature checked by the caller), also whether the chain still passes through it."""
        if seal:
            await self.seal()
        head_seq, head_hash = await self._rows.head()
        check = ChainCheck(anchor)
        async for row in self._rows.chain():
            if check.feed(row) is not None:
                break
        broken = check.finish(head_seq, head_hash)
        return AuditReport(check.checked, head_seq, head_hash, broken, await self._rows.unsealed(), anchor)

    async def anchor(self, signer: Signer, now: datetime) -> Anchor | None:
        """Sign the chain's head as it is now and keep it; the anchor (the one kept already when the head
        has not moved), or None while the chain is empty."""
        seq, head = await self._rows.head()
        if seq == 0:
            return None
        latest = await self._rows.latest_anchor()
        if latest is not None and latest.seq == seq:
            return latest
        at = iso(now)
        assert at is not None
        made = signer.sign_bytes(lambda kid: anchor_bytes(seq, head, at, kid))
        found = Anchor(seq, head, now, made["kid"], made["sig"])
        if not await self._rows.add_anchor(found):  # another replica anchored this position first
            return await self._rows.latest_anchor()
        return found

    async def anchor_tick(self, signer: Signer, now: datetime) -> Anchor | None:
        """The sweep's anchoring: at most once per `anchor_every` seconds in this process."""
        tick = time.monotonic()
        if self._anchored_at is not None and tick - self._anchored_at < self.anchor_every:
            return None
        self._anchored_at = tick
        return await self.anchor(signer, now)

    async def latest_anchor(self) -> Anchor | None:
        return await self._rows.latest_anchor()

    async def head(self) -> tuple[int, str]:
        return await self._rows.head()

    async def page(self, wanted: AuditFilter, *, after_id: int, limit: int) -> list[AuditEntry]:
        return await self._rows.page(wanted, after_id=after_id, limit=limit)

    def export(self, wanted: AuditFilter) -> AsyncIterator[AuditEntry]:
        return self._rows.export(wanted)
