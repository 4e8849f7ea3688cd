"""How every use case changes a pending request: one unit per change, the version guard, the wake-ups.

Every state change is one unit: the guarded request update, its decision, its audit row and its
outbox rows commit together; the unit's after-commit hooks then wake waiters (and the store wakes
the outbox dispatcher). Every change to a pending request goes through `guarded`: a writer that loses
the version guard re-reads and, if the request is no longer pending, reports the winner instead of
overwriting. `RequestChanges` is the base of the use cases' classes (bot/approvals/submit.py,
bot/approvals/decide.py); bot/approvals/service.py's `Service` puts them together and sets the parts
declared here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from bot.approvals.reads import Reads
from bot.approvals.types import Guarded, LostRace
from bot.domain.model import Request
from bot.errors import NotFound
from bot.live.just_committed import Fresh
from bot.live.pending_states import Known
from bot.live.waiters import InFlight, Waiters
from bot.process.clock import Clock
from bot.process.metrics import Metrics
from storage.base import Store, Unit

T = TypeVar("T")

GUARD_RETRIES = 5


class RequestChanges:
    """The parts every use case shares (set by `Service.__init__`), and the guarded change."""

    store: Store
    reads: Reads  # what the edges read (they write only through the use cases)
    clock: Clock
    metrics: Metrics
    waiters: Waiters
    new_id: Callable[[str], str]
    fresh: Fresh  # requests as committed here, for the card delivery the commit enqueued
    known: Known  # pending requests as last committed here, for a click's check (bot/live/pending_states.py)
    in_flight: InFlight  # decisions being written here, for `wait`
    _on_decided: list[Callable[[Request], None]]

    def on_decided(self, fn: Callable[[Request], None]) -> None:
        """Run `fn(request)` with the decided request after a decision commits in this process.

        Every decision (click, timeout, cancel) commits through `decide` in some process, so this
        reaches whoever must act on it without a read or a cross-process notification.
        """
        self._on_decided.append(fn)

    def touch(self, unit: Unit, request_id: str) -> None:
        """`unit` changes `request_id`: once it commits, wake whoever waits on the request here.

        (The outbox dispatcher is woken by the store itself when a unit enqueued something.)
        """
        unit.after_commit(lambda: self.waiters.wake(request_id))

    async def guarded(
        self, request_id: str, change: Callable[[Unit, Request], Awaitable[T]], *, read: Request | None = None,
        retries: int = GUARD_RETRIES, shared: bool = False,
    ) -> Guarded[T]:
        """Apply `change` to the pending request in one unit, retrying on a lost version race.

        `change(unit, request)` writes with `write(unit, updated, request)` (or `unit.update_request`
        guarded on `request.version`) and returns its result; a lost guard raises `LostRace`, which
        rolls the unit back and starts again from a fresh read. A request that is (or becomes) no
        longer pending is returned `settled`, untouched. `read`: the request as the caller just read
        it, to save one read; if it is stale the guard fails and it is read again.
        `shared`: the unit may hold other shared changes that were waiting at the same time
        (`Store.run_change(shared=True)`); `change` must then be safe to run again from the start.
        """
        request = read if read is not None and read.id == request_id else await self.get(request_id)
        for _attempt in range(retries):
            if not request.is_pending:
                return Guarded(request)

            async def attempt(unit: Unit, request: Request = request) -> T:
                self.touch(unit, request_id)  # runs only if the change commits
                return await change(unit, request)

            try:
                value = await self.store.run_change(attempt, shared=shared)
            except LostRace:
                request = await self.get(request_id)
                continue
            return Guarded(request, value, ran=True)
        return Guarded(request)

    @staticmethod
    async def write(unit: Unit, updated: Request, read: Request) -> None:
        """The version-guarded write of `updated` over `read`; raises LostRace if someone wrote first."""
        if not await unit.update_request(updated, expected_version=read.version):
            raise LostRace(read.id)

    async def get(self, request_id: str) -> Request:
        request = await self.store.get_request(request_id)
        if request is None:
            raise NotFound(f"no request with id {request_id!r}")
        return request
