"""A `Unit`: one transaction of the store, and everything a use case may write in it.

Everything a use case changes together (a request's new state, its decision, its audit rows and its
outbox rows) is written in one unit, so a crash leaves either all of it or none of it. The default
methods here (the separate calls, over storage/sql.py's statements) are the reference each engine's
fast forms are compared against (storage/sqlite/writes.py, storage/postgres/writes.py).
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from bot.domain.model import AuditEvent, Decision, Request
from bot.domain.outbox import OutboxItem
from bot.domain.votes import Vote
from storage.errors import StaleRead
from bot.domain.outbox import CardPosted
from storage.records import DueRow, Reminded

log = logging.getLogger(__name__)

T = TypeVar("T")
# A change: what a use case writes, through the unit it is given (`Store.run_change`); its value.
Change = Callable[["Unit"], Awaitable[T]]

CARD_TS_TRIES = 20  # re-reads when another write of the request came between a read and its guarded write


@dataclass(frozen=True)
class Expect:
    """A read the caller relied on (a cache's stamp) and the row it saw: the write verifies it in its own
    transaction, in the same statement where the store can (the SQL store on PostgreSQL), and raises
    StaleRead if the row is no longer `value`. `read(unit)` reads it on its own; `statement` is the same
    read as a SQLAlchemy select, built once (the SQL store caches its SQL by identity), with `params`
    its bind values in order, for a store that folds it into its write."""

    read: Callable[[Unit], Awaitable[tuple[Any, ...]]]
    statement: Any
    value: tuple[Any, ...]
    params: tuple[Any, ...] = ()



class Unit(abc.ABC):
    """One transaction. Leaving the `async with` block commits; an exception rolls back.

    `after_commit(fn)` registers work that must happen only once the unit's writes are visible to
    everyone (waking long-polls, the outbox dispatcher): the store calls it right after the commit,
    and never when the unit rolls back.
    """

    def __init__(self) -> None:
        self._after_commit: list[Callable[[], None]] = []
        self.enqueued = 0  # outbox items written in this unit

    def after_commit(self, fn: Callable[[], None]) -> None:
        self._after_commit.append(fn)

    def committed(self) -> None:
        """Called by the store once the unit has committed: run the hooks, each at most once."""
        hooks, self._after_commit = self._after_commit, []
        for fn in hooks:
            try:
                fn()
            except Exception:  # a wake-up must never undo, or hide, a committed change
                log.exception("after-commit hook failed")

    @abc.abstractmethod
    async def get_request(self, request_id: str) -> Request | None: ...

    @abc.abstractmethod
    async def find_by_idempotency_key(self, key: str) -> Request | None: ...

    @abc.abstractmethod
    async def insert_request(self, request: Request) -> None:
        """Raises DuplicateIdempotencyKey when another request holds its idempotency key."""

    @abc.abstractmethod
    async def update_request(self, request: Request, *, expected_version: int) -> bool:
        """Write `request`'s mutable fields if the stored version is still `expected_version`.

        Returns False (and writes nothing) when another writer got there first.
        """

    @abc.abstractmethod
    async def insert_decision(self, request_id: str, decision: Decision) -> None: ...

    async def record_decision(self, request_id: str, decision: Decision, audit: AuditEvent,
                              items: Sequence[OutboxItem]) -> None:
        """A decision's own rows: its decisions row, its audit row, its outbox items (each skipped if
        its dedupe_key is taken) and the cross-process wake-up (`notify`). One statement on PostgreSQL."""
        await self.insert_decision(request_id, decision)
        await self.append_audit(audit)
        for item in items:
            await self.enqueue(item)
        await self.notify(request_id)

    async def decide_request(self, decided: Request, expected_version: int, audit: AuditEvent,
                             items: Sequence[OutboxItem], *, home: Callable[[str], OutboxItem],
                             decider: str | None = None, then: Change[None] | None = None) -> bool:
        """A decision's whole write: the version-guarded write of `decided` (its `decision` set) over
        `expected_version` and, only if that matched, what `record_decision` writes with `items`
        followed by `home(user)` for each App Home user among the request's people and `decider`
        (in sorted order), then `then(unit)` (what else the decision writes: the vote that reached a
        quorum, a grant). True if written; False if another writer got there first: nothing written.

        Works in any unit, several times per unit. The SQL store does it in ONE statement on
        PostgreSQL (storage/postgres/decide.py); this default is the sequence of the separate calls.
        """
        assert decided.decision is not None
        if not await self.update_request(decided, expected_version=expected_version):
            return False
        users = await self.home_users_of(decided.id, [decider] if decider else [])
        await self.record_decision(decided.id, decided.decision, audit, [*items, *map(home, sorted(users))])
        if then is not None:
            await then(self)
        return True

    @abc.abstractmethod
    async def insert_vote(self, request_id: str, vote: Vote) -> bool:
        """Store one approval of a quorum request; False (nothing written) if this voter already has one."""

    @abc.abstractmethod
    async def append_audit(self, event: AuditEvent) -> None: ...

    @abc.abstractmethod
    async def enqueue(self, item: OutboxItem) -> bool:
        """Store an outbox item; False if one with the same dedupe_key exists."""

    @abc.abstractmethod
    async def outbox_done(self, item_id: int, now: datetime) -> None: ...

    @abc.abstractmethod
    async def outbox_retry(self, item_id: int, at: datetime, error: str, *, definite: bool) -> None:
        """Schedule another attempt. `definite`: this attempt surely had no effect."""

    @abc.abstractmethod
    async def outbox_postpone(self, item_id: int, at: datetime) -> None:
        """Give a claim back untried (the item waits for its turn): due again at `at`, and the claim
        does not count as an attempt, so `attempts`, `failures` and `uncertain` are as before it."""

    @abc.abstractmethod
    async def outbox_dead(self, item_id: int, now: datetime, error: str) -> None: ...

    @abc.abstractmethod
    async def notify(self, request_id: str) -> None:
        """Tell other processes, on commit, that this request changed (PostgreSQL NOTIFY)."""

    # -- timers and the App Home inbox -------------------------------------

    @abc.abstractmethod
    async def claim_due_requests(self, now: datetime, *, limit: int) -> list[Request]:
        """Pending requests whose `next_due_at` <= now, oldest due first, held by this unit.

        PostgreSQL locks them (`FOR UPDATE SKIP LOCKED`): another unit claiming at the same time
        gets other rows. SQLite has one writer, so the unit already excludes every other claim.
        """

    @abc.abstractmethod
    async def add_people(self, request_id: str, role: str, user_ids: Iterable[str], now: datetime) -> None:
        """Index `user_ids` as `role` ("approver" / "escalated") of the request; existing pairs are kept."""

    @abc.abstractmethod
    async def remove_people(self, request_id: str, role: str, user_ids: Iterable[str]) -> None: ...

    @abc.abstractmethod
    async def home_users(self, user_ids: Iterable[str]) -> set[str]:
        """Those of `user_ids` who have opened Signoff's App Home."""

    @abc.abstractmethod
    async def home_users_of(self, request_id: str, also: Iterable[str] = ()) -> set[str]:
        """Those of the request's people (and of `also`) who have opened App Home, in one read."""

    @abc.abstractmethod
    async def open_home(self, user_id: str, now: datetime) -> None:
        """Remember that the user opened App Home (their Home is kept up to date from now on)."""

    @abc.abstractmethod
    async def set_card_permalink(self, request_id: str, permalink: str) -> None:
        """Store the card's permalink. Not request state: no version bump, no guard."""

    @abc.abstractmethod
    async def claim_due(self, now: datetime, *, limit: int) -> list[DueRow]:
        """What `claim_due_requests` claims (the same rows, held the same way), with only what the
        timer plan reads: the timer sweep's claim."""

    @abc.abstractmethod
    async def write_reminders(self, reminders: Sequence[Reminded]) -> list[str]:
        """Write each reminder whose row still has its expected version; the ids written, in order.

        A row whose version moved (someone decided or changed it) is left alone, and its audit
        event and outbox item are not stored: that reminder does not happen. An outbox item whose
        dedupe key is taken is skipped, as with `enqueue`. The SQL store writes a batch in one
        statement on PostgreSQL and three on SQLite (tests/storage/test_sweep_contract.py).
        """

    async def update_requests(self, updates: Sequence[tuple[Request, int]]) -> int:
        """Several guarded writes (`request`, `expected_version`) at once; how many rows were written.

        The SQL store sends them as one executemany; this default writes them one by one. Each write
        keeps its version guard, but asyncpg reports no row counts for an executemany: there the
        count is the number sent, so callers hold the rows first (the timer sweep's claim locks them).
        """
        return sum([await self.update_request(r, expected_version=v) for r, v in updates])

    async def append_audits(self, events: Sequence[AuditEvent]) -> None:
        """Several audit rows at once (one executemany in the SQL store)."""
        for event in events:
            await self.append_audit(event)

    async def outbox_done_many(self, done: Sequence[tuple[int, datetime]]) -> None:
        """Several items (`id`, `now`) done at once (one executemany in the SQL store)."""
        for item_id, now in done:
            await self.outbox_done(item_id, now)

    async def insert_decided(self, request: Request, events: Sequence[AuditEvent]) -> None:
        """A new request decided at submit (`request.decision` set): its row, its decision, its audit
        rows `events`, and `notify`: what insert_request, insert_decision, append_audits and notify
        write, in as few statements as the store can (each engine's storage/<engine>/writes.py)."""
        assert request.decision is not None
        await self.insert_request(request)
        await self.insert_decision(request.id, request.decision)
        await self.append_audits(events)
        await self.notify(request.id)

    async def insert_pending(self, request: Request, audit: AuditEvent, card: OutboxItem, people: Sequence[str],
                             homes: Sequence[tuple[str, OutboxItem]], *, expects: Sequence[Expect] = ()) -> None:
        """A new pending request: its row, its audit row `audit`, its card `card`, `people` indexed as its
        approvers, and of `homes` ((user id, Home refresh), in order) the refreshes of those who have
        opened App Home: what insert_request, append_audit, enqueue, add_people, home_users and enqueue
        write, in as few statements as the store can (each engine's storage/<engine>/writes.py; one on
        PostgreSQL). Raises DuplicateIdempotencyKey, the unit then to be rolled back, like insert_request;
        StaleRead, likewise, if one of `expects` no longer holds. Nothing may be written after it in a unit of
        `Store.run_change` (where it comes first, a store may send it as the whole change)."""
        await self.verify(expects)
        await self.insert_request(request)
        await self.append_audit(audit)
        await self.enqueue(card)
        await self.add_people(request.id, "approver", people, request.created_at)
        users = await self.home_users(user for user, _ in homes)
        for user, item in homes:
            if user in users:
                await self.enqueue(item)

    async def enqueue_many(self, items: Sequence[OutboxItem]) -> None:
        """Several outbox items at once; like `enqueue`, an item whose dedupe key is taken is skipped."""
        for item in items:
            await self.enqueue(item)

    async def store_card(self, request_id: str, channel: str, ts: str, now: datetime) -> bool:
        """Store where the request's card was posted, unless a card is stored already (or no such request).

        True if this call stored it (the version goes up by one, as with any write of the request).
        Another write of the request (a timer's) never makes it fail: the SQL store does it in one
        UPDATE guarded on `card_ts` alone; this default reads and writes, and reads again if it lost.
        """
        for _ in range(CARD_TS_TRIES):
            request = await self.get_request(request_id)
            if request is None or request.card_ts:
                return False
            updated = request.evolve(card_channel=channel, card_ts=ts, updated_at=now)
            if await self.update_request(updated, expected_version=request.version):
                return True
        raise RuntimeError("request kept changing while storing its card ts")  # the unit rolls back; retried

    async def verify(self, expects: Sequence[Expect]) -> None:
        """Read each of `expects` in this unit; StaleRead if one is no longer the row its caller saw."""
        for expect in expects:
            if await expect.read(self) != expect.value:
                raise StaleRead(expect.value)

    async def record_card(self, card: CardPosted, now: datetime) -> bool:
        """`store_card`, and its "posted" audit row if this call stored it."""
        if not await self.store_card(card.request_id, card.channel, card.ts, now):
            return False
        await self.append_audit(card.audit(now))
        return True
