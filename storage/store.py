"""The `Store`: everything Signoff keeps, read outside a unit or changed through one (`run_change`).

A `Store` hands out `Unit`s (storage/unit.py): one unit is one database transaction. Each engine
implements it once (storage/sqlite/store.py, storage/postgres/store.py; storage/stores.py chooses).
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime

from bot.domain.model import AuditEvent, Request, Status
from bot.domain.inbox import Inbox
from bot.domain.outbox import CardPosted, OutboxItem
from bot.domain.resumes import ResumeClaim, ResumeState
from bot.domain.stats import StatsRow
from storage.unit import Change, T, Unit


class AuditTail(abc.ABC):
    """The newest audit rows, read on one connection: each read is its own snapshot."""

    @abc.abstractmethod
    async def last_id(self) -> int:
        """The id of the newest audit row (0: none)."""

    @abc.abstractmethod
    async def since(self, seen: int, limit: int) -> list[tuple[int, str]]:
        """(id, request or run id) of the audit rows after `seen`, oldest first, at most `limit`."""



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
