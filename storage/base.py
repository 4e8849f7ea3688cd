"""The one storage interface the service talks to, and its errors.

A `Store` hands out `Unit`s: one unit is one database transaction. Everything a
use case changes together (a request's new state, its decision, its audit
rows and its outbox rows) is written in one unit, so a crash leaves either
all of it or none of it.

Errors:

    StorageError
      +-- DuplicateIdempotencyKey   another request already holds the key
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from bot.domain.outbox import OutboxItem
from bot.domain.model import AuditEvent, Decision, Request, Status
from bot.domain.resumes import ResumeClaim, ResumeState
from bot.domain.stats import StatsRow
from bot.domain.timing import TimerState, Timing
from bot.domain.votes import Vote

log = logging.getLogger(__name__)

T = TypeVar("T")
# A change: what a use case writes, through the unit it is given (`Store.run_change`); its value.
Change = Callable[["Unit"], Awaitable[T]]

CARD_TS_TRIES = 20  # re-reads when another write of the request came between a read and its guarded write


class StorageError(Exception):
    """Base of the errors a store raises; `code` is a short machine-readable name."""

    code = "storage_error"


class DuplicateIdempotencyKey(StorageError):
    """Another request already holds the idempotency key."""

    code = "idempotency_key_taken"


class StaleRead(Exception):
    """A write found a read its caller relied on out of date (`Expect`): the unit is to be rolled back."""


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


class AuditTail(abc.ABC):
    """The newest audit rows, read on one connection: each read is its own snapshot."""

    @abc.abstractmethod
    async def last_id(self) -> int:
        """The id of the newest audit row (0: none)."""

    @abc.abstractmethod
    async def since(self, seen: int, limit: int) -> list[tuple[int, str]]:
        """(id, request or run id) of the audit rows after `seen`, oldest first, at most `limit`."""


@dataclass(frozen=True)
class CardPosted:
    """Where a request's card went (Slack's channel id and ts): a card post's result, written with its
    delivery's done mark (`Store.outbox_finished`) and audited as "posted" only if it was stored."""

    request_id: str
    channel: str
    ts: str

    def audit(self, now: datetime) -> AuditEvent:
        return AuditEvent(self.request_id, "posted", now, None, {"channel": self.channel, "ts": self.ts})


@dataclass(frozen=True)
class DueRow:
    """A due request as the timer sweep claims it: only what the timer plan reads.

    `timers` holds the schedule (the scalar timer columns); the escalation record (who it went
    to, from whom, the note) is not read and is left at its defaults: a step that needs it (an
    escalation, a timeout) reads the whole request in the same unit.
    """

    id: str
    version: int
    timing: Timing
    timers: TimerState
    undo_until: datetime | None = None  # an approval held in its undo window (bot/domain/undo.py)


@dataclass(frozen=True)
class Reminded:
    """One reminder of the sweep: the row's new reminder columns, its audit event and outbox item.

    Written only if the row's version is still `expected_version` (then raised by one); the audit
    event and the item are stored only with the row's write, never without it.
    """

    request_id: str
    expected_version: int
    reminders_sent: int
    remind_at: datetime | None
    next_due_at: datetime | None
    at: datetime
    audit: AuditEvent
    item: OutboxItem


@dataclass(frozen=True)
class InboxEntry:
    """A pending request in someone's inbox; `can_decide`: they are one of its approvers."""

    request: Request
    can_decide: bool


@dataclass(frozen=True)
class Inbox:
    """One person's App Home lists: each the first `limit` items, plus how many there are in all."""

    waiting: tuple[InboxEntry, ...] = ()
    waiting_total: int = 0
    escalated: tuple[InboxEntry, ...] = ()
    escalated_total: int = 0
    decided: tuple[Request, ...] = ()
    decided_total: int = 0


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


class Store(abc.ABC):
    """Everything Signoff keeps. Reads outside a unit see committed data.

    `on_outbox_commit(fn)`: `fn()` runs after every unit that enqueued an outbox item commits, so
    the dispatcher is woken by the store itself and no use case has to remember to.
    """

    dialect: str
    """The engine's SQLAlchemy dialect name: "sqlite" or "postgresql"."""
    _outbox_listeners: list[Callable[[], None]]
    concurrent_writers: bool = False
    """Transactions write side by side (PostgreSQL), rather than one writer at a time (SQLite): grouping
    changes into one transaction then saves nothing but costs round trips (storage/group_commit.py)."""
    announces_changes: bool = False
    """Other processes' commits are announced (PostgreSQL's NOTIFY: `listen`), or must be looked for
    (SQLite: `foreign_data_version`, then `audit_tail`)."""

    def listen(self, on_change: Callable[[str], None]) -> AbstractAsyncContextManager[asyncio.Event]:
        """Call `on_change(id)` for each request or run another process changes, while the block runs;
        the event is set when the listening connection is lost. Only where `announces_changes`."""
        raise NotImplementedError

    async def foreign_data_version(self) -> int:
        """A number that moves when another process commits. Only where changes are not announced."""
        raise NotImplementedError

    def audit_tail(self) -> AbstractAsyncContextManager[AuditTail]:
        """A reader of the newest audit rows (each change of a request or a run appends one), on one
        connection held for the block."""
        raise NotImplementedError

    def on_outbox_commit(self, fn: Callable[[], None]) -> None:
        self.__dict__.setdefault("_outbox_listeners", []).append(fn)

    def _finish_unit(self, unit: Unit) -> None:
        """Run after a unit committed: its own hooks, then the outbox listeners if it enqueued."""
        if unit.enqueued:
            for fn in self.__dict__.get("_outbox_listeners", ()):
                unit.after_commit(fn)
        unit.committed()

    @abc.abstractmethod
    def unit(self) -> AbstractAsyncContextManager[Unit]: ...

    async def run_change(self, change: Change[T], *, shared: bool = False) -> T:
        """Run `change` (its reads and writes go through the unit it is given) and commit it; returns
        its value once it committed, or raises what it raised, nothing of it written. How it commits is
        the store's choice: a change whose first write is its whole write (`insert_pending`, or
        `decide_request` with no `then`) may be sent as one statement, its own transaction
        (storage/postgres/lone_unit.py). `shared`: it may share a transaction with other shared changes
        waiting at the same time (storage/group_commit.py); it must then be safe to run again from the
        start (it writes only through its unit and acts only in its unit's after-commit hooks).
        By default: a unit of its own."""
        async with self.unit() as unit:
            return await change(unit)

    @abc.abstractmethod
    async def get_request(self, request_id: str) -> Request | None: ...

    @abc.abstractmethod
    async def list_requests(
        self, *, status: Status | None, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[Request]:
        """Oldest first; `after` is the (created_at, id) of the last item of the previous page."""

    @abc.abstractmethod
    async def approved_of_tool(self, tool: str, *, since: datetime, limit: int) -> list[Request]:
        """Approved requests of `tool` created since `since`, newest first, at most `limit` (what an AI
        note compares a call with: bot/domain/unusual.py)."""

    @abc.abstractmethod
    async def pending_approval_by_card(self, channel: str, ts: str) -> Request | None:
        """The pending approval whose card is the message `ts` in `channel` (a question in its thread)."""

    @abc.abstractmethod
    async def statuses(self, request_ids: Iterable[str]) -> dict[str, Status]: ...

    @abc.abstractmethod
    async def count_pending(self, owner: str) -> int:
        """How many pending requests the API token named `owner` made (committed ones)."""

    @abc.abstractmethod
    async def audit_events(self, request_id: str) -> list[AuditEvent]: ...

    @abc.abstractmethod
    async def claim_outbox(self, now: datetime, *, limit: int, lease_seconds: float) -> list[OutboxItem]:
        """Claim due items: each is leased to this caller and its `attempts` counted."""

    async def outbox_finished(self, done: Sequence[tuple[int, datetime]], audits: Sequence[AuditEvent],
                              cards: Sequence[tuple[CardPosted, datetime]] = ()) -> set[str]:
        """Deliveries that had nothing else to write: the cards they posted (`Unit.record_card`, each with
        its time), their audit rows and done marks (id, when), in one transaction (a store may send it
        as one statement, storage/postgres/outbox.py). Returns the ids of the requests whose card it stored."""
        stored = set()
        async with self.unit() as unit:
            for card, at in cards:
                if await unit.record_card(card, at):
                    stored.add(card.request_id)
            await unit.append_audits(audits)
            await unit.outbox_done_many(done)
        return stored

    @abc.abstractmethod
    async def next_outbox_due(self) -> datetime | None: ...

    @abc.abstractmethod
    async def outbox_items(self, request_id: str | None = None) -> list[OutboxItem]: ...

    @abc.abstractmethod
    async def inbox(self, user_id: str, *, limit: int, decided_since: datetime) -> Inbox:
        """The user's App Home: pending requests they approve (oldest first, not escalated to them),
        pending requests escalated to them (oldest first), what they decided since `decided_since`
        (newest first)."""

    # -- resume claims (bot/domain/resumes.py): each call one guarded write; of two at once, one wins ----
    @abc.abstractmethod
    async def stats_rows(self, since: datetime, until: datetime, channel: str | None, *,
                         cap: int) -> tuple[list[StatsRow], bool]:
        """The approval requests created in [since, until), of `channel` or all, at most `cap` (and whether
        there were more): one indexed time range (storage/stats_sql.py)."""

    @abc.abstractmethod
    async def stats_channels(self, since: datetime, until: datetime, *, cap: int) -> list[str]: ...

    @abc.abstractmethod
    async def mark_viewed(self, request_ids: Sequence[str], at: datetime) -> list[StatsRow]:
        """Stamp the first view on those pending requests that had none; those stamped."""

    @abc.abstractmethod
    async def claim_resume(self, wanted: ResumeClaim, now: datetime) -> tuple[bool, ResumeClaim]:
        """(True, the row) if `wanted.owner` now holds `wanted.key` of `wanted.token` (a new key, or
        `ResumeClaim.may_take` by `now`) until `wanted.lease_until`; else (False, the holder's row)."""

    @abc.abstractmethod
    async def renew_resume(self, token: str, key: str, owner: str, until: datetime,
                           now: datetime) -> tuple[bool, ResumeClaim | None]: ...

    @abc.abstractmethod
    async def finish_resume(self, token: str, key: str, owner: str, state: ResumeState, error: str | None,
                            now: datetime) -> tuple[bool, ResumeClaim | None]:
        """Renew (above) and finish: (`owner` held it `resuming` and this call wrote, the row as it is now)."""

    @abc.abstractmethod
    async def get_resume(self, token: str, key: str) -> ResumeClaim | None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...
