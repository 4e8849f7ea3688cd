"""What other processes changed, watched for this process's long-polls (bot/live/waiters.py holds them).

- Across processes on PostgreSQL: LISTEN on the channel that `Unit.notify`
  NOTIFYs inside the deciding transaction (delivered only on commit).
- Across processes on SQLite: there are no notifications, so while anyone is
  waiting one watcher per process checks `PRAGMA data_version` on the process's writer
  connection (it changes when another connection commits, so with other processes' commits
  only: this process's own commits woke their waiters already) every `SQLITE_CHECK_SECONDS`,
  and when it changed reads the audit rows appended since its last look, waking the waiters
  of those ids (a cost that grows with the changes, never with the number of waiters). This
  is the one bounded check DESIGN allows; it stops when nobody waits.

On PostgreSQL each notified id is also handed to `changed` before its waiters wake (the app passes
the pending states held for a click's check, bot/live/pending_states.py, which drop it): a NOTIFY goes
with a decision-like write (a decision, a vote, a batch, an undelivered mark), so a state held here is
at an older version and would only fail its click's guarded write. Without it, a request submitted
here and decided by another replica stayed held until the cap (1,024) pushed it out, and memory grew
with every such request until then (bench.soak's replica A). SQLite's audit rows are not handed
on: they include this process's own submits, whose held states are current.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable

from bot.live.waiters import Waiters
from bot.process.metrics import Metrics
from storage.base import AuditTail, Store

log = logging.getLogger(__name__)

SQLITE_CHECK_SECONDS = 0.02  # a PRAGMA read, only while someone waits: cheap enough to ask often
CHANGES_PER_LOOK = 1000


class CrossProcessWatcher:
    """Wakes this process's waiters when another process decides a request.

    One per process. On SQLite its cost is counted in /metrics: `signoff_longpoll_watch_looks_total`
    (looks at PRAGMA data_version), `..._changes_total` (looks that found another process's commit)
    and `..._queries_total` (every statement it ran): at most two statements a look, however many
    requests are waited on (tests/api/test_longpoll_watcher.py holds 1 and 200 long-polls to show it).
    """

    def __init__(self, store: Store, waiters: Waiters, metrics: Metrics | None = None,
                 changed: Callable[[str], None] = lambda _id: None) -> None:
        self.store = store
        self.waiters = waiters
        self.metrics = metrics or Metrics()
        self.changed = changed  # told of every id another process changed, before its waiters wake
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
        # This process's own NOTIFYs come here too: each goes with a write whose version this process's
        # held state does not have either (a decision forgot it already), so dropping it loses nothing.
        self.changed(changed_id)
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
