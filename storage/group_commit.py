"""Group commit: items that arrive while one transaction is being written share the next one.

The auto-allowed path (policy decides at submit, no card) is one small transaction per request,
and at the rate agents send tool calls the transaction itself (BEGIN, COMMIT, the unit's pool
checkout and hooks; on PostgreSQL two round trips) cost more than the rows in it. `GroupCommit`
writes every item waiting when its turn comes in ONE call of `write(items)` (one unit); each caller
returns when the unit holding its item committed.

Invariants:
- An item is committed at most once, and its caller returns only after that commit (or gets the
  exception its own item raised).
- A failing group is written again item by item, so an item's own failure (a taken idempotency
  key, a stale check) is reported to its caller only, and the others still commit.
- One group at a time per `GroupCommit`: SQLite has one writer anyway, and on PostgreSQL a group
  grows while the previous one is in flight.

`SharedUnits` is the same for changes (`Store.run_change(change, shared=True)`: decisions): changes
waiting share the next unit, on a store with one writer (SQLite). Where transactions write
concurrently (PostgreSQL) the store runs each change on its own instead (storage/postgres/lone_unit.py).

Used by the stores, and by the gate (policy-decided submits) and the outbox (delivery results) for
their own groups.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from storage.base import Unit

log = logging.getLogger(__name__)

T = TypeVar("T")


class GroupCommit(Generic[T]):
    def __init__(self, write: Callable[[Sequence[T]], Awaitable[None]], *, limit: int = 200) -> None:
        self._write = write
        self._limit = limit
        self._waiting: list[tuple[T, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> None:
        """Write `item` in the next group; returns once that group committed."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, done))
        if self._task is None:
            self._task = asyncio.create_task(self._drain())
        await done

    async def _drain(self) -> None:
        group: list[tuple[T, asyncio.Future[None]]] = []
        try:
            await asyncio.sleep(0)  # one turn of the loop: requests already read join this group
            while self._waiting:
                group, self._waiting = self._waiting[: self._limit], self._waiting[self._limit:]
                try:
                    await self._write([item for item, _ in group])
                except Exception as exc:
                    if len(group) == 1:
                        _fail(group[0][1], exc)
                    else:
                        await self._one_by_one(group)
                else:
                    for _, done in group:
                        _succeed(done)
                group = []
        except BaseException as exc:  # cancelled (shutdown): no caller is left waiting forever
            for _, done in group + self._waiting:
                _fail(done, exc if isinstance(exc, Exception) else RuntimeError("group commit stopped"))
            self._waiting = []
            raise
        finally:
            self._task = None

    async def _one_by_one(self, group: list[tuple[T, asyncio.Future[None]]]) -> None:
        for item, done in group:
            try:
                await self._write([item])
            except Exception as exc:
                _fail(done, exc)
            else:
                _succeed(done)


def _succeed(done: asyncio.Future[None]) -> None:
    if not done.done():  # its caller may have been cancelled meanwhile
        done.set_result(None)


def _fail(done: asyncio.Future[None], exc: BaseException) -> None:
    if not done.done():
        done.set_exception(exc)


class SharedUnits:
    """Group commit for changes that each need a unit of their own: the changes that arrive while a
    unit is being written run, one after another, in the next unit (`unit()` opens one).

    `run(change)` returns `change(unit)`'s value once the unit holding it committed. A change that
    raises (a lost version guard, a vote already counted) rolls its whole unit back; GroupCommit then
    runs every change of that unit again, each in a unit of its own, so only the raising change's
    caller sees the exception and the others commit. So a change must be safe to run again from the
    start: it writes only through its unit, and registers its effects as the unit's after-commit hooks.
    """

    def __init__(self, unit: Callable[[], AbstractAsyncContextManager[Unit]], *, limit: int = 200) -> None:
        self._unit = unit
        self._commit: GroupCommit[_Change[Any]] = GroupCommit(self._write, limit=limit)

    async def run(self, change: Callable[[Unit], Awaitable[T]]) -> T:
        held: _Change[T] = _Change(change)
        await self._commit.submit(held)
        return held.value  # type: ignore[return-value]  # set by the write that committed

    async def _write(self, changes: Sequence[_Change[Any]]) -> None:
        async with self._unit() as unit:
            for held in changes:
                held.value = await held.change(unit)


@dataclass(eq=False)
class _Change(Generic[T]):
    change: Callable[[Unit], Awaitable[T]]
    value: T | None = None
