"""Wake-ups for waiting long-polls: pushed, never a sleep loop on the decision path.

- In one process: an asyncio.Event per waiter, set right after the deciding
  transaction commits (`Waiters.wake`).
- Across processes on PostgreSQL: LISTEN on the channel that `Unit.notify`
  NOTIFYs inside the deciding transaction (delivered only on commit).
- Across processes on SQLite: there are no notifications, so while anyone is
  waiting one watcher per process checks `PRAGMA data_version` on the process's writer
  connection (it changes when another connection commits, so with other processes' commits
  only: this process's own commits woke their waiters already) every `SQLITE_CHECK_SECONDS`,
  and when it changed reads the audit rows appended since its last look, waking the waiters
  of those ids (a cost that grows with the changes, never with the number of waiters). This
  is the one bounded check DESIGN allows; it stops when nobody waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any


from bot.process.metrics import Metrics
from storage.base import AuditTail, Store

log = logging.getLogger(__name__)

SQLITE_CHECK_SECONDS = 0.02  # a PRAGMA read, only while someone waits: cheap enough to ask often
CHANGES_PER_LOOK = 1000


class Waiter(asyncio.Event):
    """A waiter's event; `settled` is the request as a decision in this process committed it, if one
    did since the waiter last cleared the event (so the waiter can answer without reading it again)."""

    settled: Any = None

    def clear(self) -> None:
        self.settled = None
        super().clear()


class Waiters:
    """Per-request events for waiters in this process."""

    def __init__(self) -> None:
        self._events: dict[str, set[Waiter]] = defaultdict(set)
        self.changed = asyncio.Event()  # set whenever the set of waited-on ids grows

    @contextlib.contextmanager
    def register(self, request_id: str) -> Any:
        event = Waiter()
        self._events[request_id].add(event)
        self.changed.set()
        try:
            yield event
        finally:
            waiting = self._events.get(request_id)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self._events[request_id]

    def wake(self, request_id: str, settled: Any = None) -> None:
        """Wake the waiters of `request_id`; `settled`: the request as this process just committed it
        out of `pending` (handed to them, so they need not read it back)."""
        for event in self._events.get(request_id, ()):
            if settled is not None:
                event.settled = settled
            event.set()

    def wake_all(self) -> None:
        for request_id in list(self._events):
            self.wake(request_id)

    def waited_ids(self) -> list[str]:
        return list(self._events)


class InFlight:
    """The decisions this process is writing now, per request, for its waiters (`Service.wait`).

    A wake-up without the decided request (a notification) that comes while this process is deciding
    the request is held back: on PostgreSQL a decision's own NOTIFY can reach the listener before the
    statement's result reaches its writer, and the waiter would read a row the decision is about to
    hand it. When the last decision of the request in flight ends, held-back waiters are woken again:
    one that committed has handed them the request already; otherwise (it wrote nothing, or failed)
    they read it then, so no wake-up is lost.
    """

    def __init__(self, waiters: Waiters) -> None:
        self._waiters = waiters
        self._deciding: dict[str, int] = {}  # request id -> its decisions in flight here
        self._held: set[str] = set()  # ids whose waiters held a wake-up back

    def begin(self, request_id: str) -> None:
        self._deciding[request_id] = self._deciding.get(request_id, 0) + 1

    def hold(self, request_id: str) -> bool:
        """True if a decision of `request_id` is in flight here: the waiter waits for it."""
        if request_id not in self._deciding:
            return False
        self._held.add(request_id)
        return True

    def holding(self, request_id: str) -> bool:
        """Whether a waiter of `request_id` holds a wake-up back now."""
        return request_id in self._held

    def end(self, request_id: str) -> None:
        left = self._deciding.pop(request_id) - 1
        if left:
            self._deciding[request_id] = left
        elif request_id in self._held:
            self._held.discard(request_id)
            self._waiters.wake(request_id)


class CrossProcessWatcher:
    """Wakes this process's waiters when another process decides a request.

    One per process. On SQLite its cost is counted in /metrics: `signoff_longpoll_watch_looks_total`
    (looks at PRAGMA data_version), `..._changes_total` (looks that found another process's commit)
    and `..._queries_total` (every statement it ran): at most two statements a look, however many
    requests are waited on (tests/api/test_longpoll_watcher.py holds 1 and 200 long-polls to show it).
    """

    def __init__(self, store: Store, waiters: Waiters, metrics: Metrics | None = None) -> None:
        self.store = store
        self.waiters = waiters
        self.metrics = metrics or Metrics()
        self._task: asyncio.Task[None] | None = None
        # Kept for callers that register checks; SQLite's wake-ups now come from the audit rows.
        self.checks: list[Callable[[list[str]], Awaitable[Iterable[str]]]] = []

    async def start(self) -> None:
        run = self._listen if self.store.announces_changes else self._watch
        self._task = asyncio.create_task(run(), name="signoff-cross-process-watcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _listen(self) -> None:
        backoff = 0.1
        while True:
            try:
                async with self.store.listen(self._notified) as closed:
                    backoff = 0.1
                    # Anything decided while we were not listening: let every waiter re-check.
                    self.waiters.wake_all()
                    await closed.wait()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("postgres LISTEN connection failed; reconnecting")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    def _notified(self, changed_id: str) -> None:
        self.metrics.longpoll_notifications.inc()
        self.waiters.wake(changed_id)

    async def _watch(self) -> None:
        backoff = 0.1
        while True:
            try:
                await self._watch_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # a failed read must not end cross-process wake-ups for good
                log.exception("sqlite cross-process check failed; starting again")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    async def _watch_once(self) -> None:
        """Wake the waiters of whatever another process changed: read the audit rows appended since the
        last look (every change of a request or a run appends one, in its own transaction). The cost of
        a look is the number of changes, not the number of waiters."""
        async with self.store.audit_tail() as tail:
            last = await self._data_version()
            seen = await self._last_audit_id(tail)
            while True:
                if not self.waiters.waited_ids():
                    self.waiters.changed.clear()
                    await self.waiters.changed.wait()
                    # Not a new baseline: changes committed while nobody waited (or between a new
                    # waiter's own read and now) are still after `seen`, and are looked at next.
                    last = await self._data_version()
                    self.metrics.watch_looks.inc()  # a look, and counted as one that found a change
                    self.metrics.watch_changes.inc()
                    seen = await self._wake_changed(tail, seen)
                    continue
                await asyncio.sleep(SQLITE_CHECK_SECONDS)
                version = await self._data_version()
                self.metrics.watch_looks.inc()
                if version == last:
                    continue
                last = version
                self.metrics.watch_changes.inc()
                seen = await self._wake_changed(tail, seen)

    async def _data_version(self) -> int:
        # On the writer's connection, not the watcher's: a reader's data_version also moved with this
        # process's own commits, and each of those cost a read of the audit rows (bench.all --profile).
        version = await self.store.foreign_data_version()
        self.metrics.watch_queries.inc()  # after the read: a look's two counters move together
        return version

    async def _last_audit_id(self, tail: AuditTail) -> int:
        self.metrics.watch_queries.inc()
        return await tail.last_id()

    async def _wake_changed(self, tail: AuditTail, seen: int) -> int:
        """One read of the audit rows after `seen`, then a wake-up per changed id (an in-memory lookup)."""
        self.metrics.watch_queries.inc()
        rows = await tail.since(seen, CHANGES_PER_LOOK)
        if not rows:
            return seen
        if len(rows) == CHANGES_PER_LOOK:  # a backlog: let every waiter re-read, and skip past it
            self.waiters.wake_all()
            return await self._last_audit_id(tail)
        for _, changed_id in rows:
            self.waiters.wake(changed_id)
        return rows[-1][0]
