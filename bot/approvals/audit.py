"""The audit log's use cases: seal it into the hash chain, prove the chain, page and export it.

Sealing runs beside the timers' sweep in every process (and before `verify`/`export`); rows appended
by the approval path are sealed on the next sweep, so until then a row is in the log but not yet in the
chain (`AuditReport.unsealed`). See bot/domain/audit_chain.py for what the chain proves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from bot.domain.audit_chain import AuditEntry, AuditFilter, Break, ChainCheck
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

    @property
    def ok(self) -> bool:
        return self.broken is None

    def words(self) -> str:
        if self.broken is not None:
            return f"audit chain BROKEN at {self.broken.words()} ({self.checked} rows before it are intact)"
        pending = f"; {self.unsealed} newer rows not sealed yet" if self.unsealed else ""
        return (f"audit chain intact: {self.checked} rows, head at position {self.head_seq}, "
                f"hash {self.head_hash}{pending}")


class AuditLog:
    def __init__(self, store: SqlStore) -> None:
        self._rows = AuditStore(store)

    async def seal(self) -> int:
        """Seal every row not yet in the chain; how many."""
        return await self._rows.seal()

    async def verify(self, *, seal: bool = True) -> AuditReport:
        """Walk the whole chain in position order (a page at a time) and say where it first breaks."""
        if seal:
            await self.seal()
        head_seq, head_hash = await self._rows.head()
        check = ChainCheck()
        async for row in self._rows.chain():
            if check.feed(row) is not None:
                break
        broken = check.finish(head_seq, head_hash)
        return AuditReport(check.checked, head_seq, head_hash, broken, await self._rows.unsealed())

    async def page(self, wanted: AuditFilter, *, after_id: int, limit: int) -> list[AuditEntry]:
        return await self._rows.page(wanted, after_id=after_id, limit=limit)

    def export(self, wanted: AuditFilter) -> AsyncIterator[AuditEntry]:
        return self._rows.export(wanted)
