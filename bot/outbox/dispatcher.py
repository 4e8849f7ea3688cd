"""The outbox dispatcher: performs side effects that were committed with a state change.

Items are claimed with a lease (so two replicas never work on one item at
once), handed to the handler for their kind, and finished in a unit of their
own: done (with the handler's own writes, e.g. the card's ts), retried later
(429 honours Retry-After; 5xx and connection errors back off), or dead.

The dispatcher is woken right after a commit; its periodic sweep only
recovers items left behind by a crash or waiting for their retry time.
Items for one request are delivered in order, one at a time per process.

It claims only as many items as it has free delivery slots, so a claimed item starts at once and
its lease covers its delivery. (Claiming ahead of the slots let a backlog's items sit claimed in
memory until their leases ran out, be put back, and be claimed again: under load the dispatcher
spent its time bouncing items instead of delivering them.) A claim that ends in `Retry(waiting=True)`
did nothing and is given back: it counts as no attempt, so neither backoff nor `uncertain` grows
from waiting for a turn (the channel's pace, the card's post, a free slot).

Each look claims; only the periodic look (at start, then every `sweep_seconds`) also reads when the
next pending item falls due (`next_outbox_due`). Between those, the loop knows every due time that
can come up without a look: an item enqueued here wakes it on its commit (items are due when
enqueued), and an item put back here notes its due time in memory (`_due`, every such time: a
channel's queue puts its cards back to turns a second apart). What it cannot
know of (another process's items, a lease that runs out after a crash) the periodic look finds,
as it always did: every wait ends by the next periodic look. The read after every claim cost one
statement per delivered card (its post and its update) and found nothing the claim had not.

Results are written in groups (`GroupCommit`, in bot/approvals/outbox_rows.py): deliveries that finish
while one result unit is being written share the next one, so a burst of card updates commits its done marks a few at a
time; a failing group is written again item by item, so one item's failure never loses another's.

In order means across retries too: when an item of a request must be tried again later, the
request's later items that come up in this process before that time wait behind it (`_held`), so
a thread never shows "Done" above the warning that came first. (Webhooks are not held, nor hold.)
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import random
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from datetime import datetime, timedelta

from bot.outbox import effects
from bot.approvals.outbox_rows import OutboxRows
from bot.approvals.reads import Reads
from bot.process.clock import Clock
from bot.process.metrics import Metrics
from bot.domain.outbox import OutboxItem
from bot.domain.outbox import CardPosted
from bot.outbox.results import Dead as Dead, Done as Done, Handler as Handler, Result as Result, Retry as Retry

# Webhooks go to the agent's receiver, not to Slack: one that retries for hours holds back no Slack
# message of its request, and no Slack retry holds back the webhook.
UNORDERED_KINDS = frozenset({effects.WEBHOOK})

log = logging.getLogger(__name__)

# The outbox item this task is delivering (its id), for handlers that need to know who asks: the
# channel pace keeps a waiting item's place in its channel's queue by it (bot/slack/pace.py).
delivering: ContextVar[int | None] = ContextVar("signoff_outbox_delivering", default=None)

LEASE_SECONDS = 60.0
BATCH = 50  # most items one claim takes (`drain` and the loop take at most the free slots)
CONCURRENCY = 16


async def after_post(reads: Reads, ordered_by: str, post_kind: str, what: str) -> Result:
    """For an item that needs a message which is not posted: wait while its post is still queued
    (it is ahead, and delivered in order); if the post gave up, there is nothing to do."""
    items = await reads.outbox(ordered_by)
    if any(i.kind == post_kind and i.status == "pending" for i in items):
        return Retry(0.5, f"{what} not posted yet", waiting=True)
    return Done()


def backoff(attempt: int, *, base: float = 0.5, cap: float = 300.0) -> float:
    """Exponential backoff with full jitter on the upper half: attempt 1 -> ~0.5 s, 2 -> ~1 s, ..."""
    delay = min(cap, base * 2.0 ** max(0, attempt - 1))
    return delay / 2 + random.random() * delay / 2


class Dispatcher:
    def __init__(
        self,
        rows: OutboxRows,
        handlers: dict[str, Handler],
        *,
        clock: Clock,
        metrics: Metrics,
        sweep_seconds: float = 5.0,
        lease_seconds: float = LEASE_SECONDS,
    ) -> None:
        self.rows = rows  # the outbox's rows: claims and results (bot/approvals/outbox_rows.py)
        self.handlers = handlers
        self.clock = clock
        self.metrics = metrics
        self.sweep_seconds = sweep_seconds
        self.lease_seconds = lease_seconds
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._inflight: set[asyncio.Task[None]] = set()
        self._request_locks: dict[str, tuple[asyncio.Lock, int]] = {}  # lock and how many deliveries use it
        self._slots = asyncio.Semaphore(CONCURRENCY)
        self._active = 0  # claimed and not finished: never more than CONCURRENCY (see the module docstring)
        self._more_due = False  # the last claim filled every free slot: more may be due, waiting for one
        self._look = True  # a wake asked for a claim (an enqueue committed, a slot freed while items wait)
        self._due: list[datetime] = []  # a heap: due times of items known to wait (see the docstring)
        self._next_full = 0.0  # loop time of the next periodic look (claim and read of the next due time)
        rows.cards_stored = self._cards_stored  # told of the cards each group of results stored
        # Held from a claim until its items are in _inflight, so `drain` never misses a claim in progress.
        self._claiming = asyncio.Lock()
        self.idle = asyncio.Event()
        self._failing: set[int] = set()  # items that failed here and have not got through yet (see _report)
        # key -> (id, due) of its earliest item that is to be tried again: later items wait until then
        self._held: dict[str, tuple[int, datetime]] = {}
        self._card_listeners: list[Callable[[CardPosted, datetime], None]] = []

    @property
    def in_flight(self) -> int:
        """Deliveries started and not finished (what a graceful stop waits for)."""
        return len(self._inflight)

    def wake(self, _request_id: str | None = None) -> None:
        self._look = True
        self._wake.set()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="signoff-outbox")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for task in list(self._inflight):
            task.cancel()
        if self._inflight:
            await asyncio.gather(*self._inflight, return_exceptions=True)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        timed_out = True
        while True:
            full = loop.time() >= self._next_full
            if full or timed_out or self._look:  # else only a put-back's due time is to be reckoned
                self._look = False
                if full:
                    self._next_full = loop.time() + self.sweep_seconds
                try:
                    await self.run_once()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("outbox sweep failed")
                    self._due.clear()  # wait for the periodic look rather than retry at once
                self.metrics.sweeps.labels("outbox").inc()
            if self._free() <= 0:  # every slot busy: a finishing delivery wakes us
                timed_out = await self._wait(self._next_full - loop.time())
            else:  # claimed fewer than the free slots: nothing more is due now
                timed_out = await self._sleep_until_due(read=full)

    def _free(self) -> int:
        return CONCURRENCY - self._active

    async def _sleep_until_due(self, *, read: bool) -> bool:
        """Wait until the next item known to be due, a wake, or the next periodic look; True if timed out.

        `read`: this was the periodic look, so read the next due time, which covers what this process
        cannot know of (another process's items and leases)."""
        if read:
            try:
                due = await self.rows.next_due()
            except Exception:
                log.exception("could not read the next outbox due time")
                due = None
            self._note_due(due)
        timeout = self._next_full - asyncio.get_running_loop().time()
        if self._due:
            timeout = min(timeout, (self._due[0] - self.clock.now()).total_seconds())
        if not self._inflight:
            self.idle.set()
        timed_out = await self._wait(timeout)
        self.idle.clear()
        return timed_out

    def _note_due(self, at: datetime | None) -> None:
        if at is not None and (not self._due or at != self._due[0]):  # (the periodic read finds one often)
            heapq.heappush(self._due, at)

    async def _wait(self, timeout: float) -> bool:
        """Until woken or `timeout` seconds passed; True if the time ran out."""
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancel that lands just as the
        # event is set, and stop() would then wait forever for a loop that keeps running.
        timed_out = False
        try:
            async with asyncio.timeout(max(0.0, timeout)):
                await self._wake.wait()
        except TimeoutError:
            timed_out = True
        self._wake.clear()
        return timed_out

    async def run_once(self) -> int:
        """Claim due items, as many as there are free slots, and start delivering them; how many were claimed."""
        async with self._claiming:
            limit = min(BATCH, self._free())
            if limit <= 0:
                self._more_due = True  # every slot busy: items may be due, so a finishing delivery looks
                return 0
            now = self.clock.now()
            while self._due and self._due[0] <= now:  # this claim takes them (or another process holds them)
                heapq.heappop(self._due)
            items = await self.rows.claim(now, limit=limit, lease_seconds=self.lease_seconds)
            self._more_due = len(items) >= limit
            self._active += len(items)
            for item in items:
                task = asyncio.create_task(self._deliver(item))
                self._inflight.add(task)
                task.add_done_callback(self._inflight.discard)
        return len(items)

    async def drain(self) -> None:
        """Deliver everything due now, including what deliveries enqueue as they finish, and wait for it."""
        while True:
            claimed = await self.run_once()
            if not claimed and not self._inflight:
                return
            if self._inflight:
                await asyncio.wait(list(self._inflight), return_when=asyncio.FIRST_COMPLETED)

    async def _deliver(self, item: OutboxItem) -> None:
        # Claimed just now for `lease_seconds`: finish (result stored) before another process may
        # claim the item, so no two attempts of one item ever overlap. 10% stays for the write.
        deadline = asyncio.get_running_loop().time() + self.lease_seconds * 0.9
        key = item.request_id or f"item:{item.id}"
        lock, users = self._request_locks.get(key, (asyncio.Lock(), 0))
        self._request_locks[key] = (lock, users + 1)
        result: Result | None = None
        try:
            async with lock, self._slots:
                result = await self._deliver_locked(item, deadline)
        finally:
            lock, users = self._request_locks[key]
            if users == 1:
                del self._request_locks[key]
            else:
                self._request_locks[key] = (lock, users - 1)
            self._active -= 1  # before the wake: the loop sees the free slot when it looks
            # The loop looks again only if due items waited for this slot. Otherwise a look would find
            # nothing: an item enqueued since woke the loop on its commit, and a follower put back behind
            # this one (the card update after its post) is due at the time it was given. An item put
            # back only wakes the loop to reckon its due time (no claim: it is not due yet, or is at once).
            # Each needless look was a claiming transaction and a read, twice per approval.
            if self._more_due:
                self._look = True
                self._wake.set()
            elif not isinstance(result, Done | Dead):
                self._wake.set()
            elif len(self._inflight) <= 1:  # only this one, which ends now
                self.idle.set()

    async def _deliver_locked(self, item: OutboxItem, deadline: float) -> Result:
        handler = self.handlers.get(item.kind)
        left = deadline - asyncio.get_running_loop().time()
        ahead = self._ahead(item)
        if handler is None:
            result: Result = Dead(f"no handler for outbox kind {item.kind!r}")
        elif ahead is not None:
            result = ahead
        elif left <= 0:  # waited for its turn until the lease was nearly gone: nothing was done
            result = Retry(0.0, "its lease ran out before the delivery could start", waiting=True)
        else:
            delivering.set(item.id)  # this delivery's own task: seen by nothing else
            try:
                async with asyncio.timeout(left):
                    result = await handler(item)
            except TimeoutError:  # its calls together outlasted the lease: the outcome is unknown
                result = Retry(backoff(item.attempts), f"delivery outlasted its {self.lease_seconds:g} s lease",
                               definite=False)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug in a handler must not kill the dispatcher
                log.exception("outbox handler %s failed", item.kind)
                result = Retry(backoff(item.attempts), f"{type(exc).__name__}: {exc}", definite=False)
        await self._finish(item, result)
        return result

    def _ahead(self, item: OutboxItem) -> Retry | None:
        """A Retry if an earlier item of the same request is still to be tried again (it goes first)."""
        if item.request_id is None or item.kind in UNORDERED_KINDS:
            return None
        held = self._held.get(item.request_id)
        if held is None or item.id is None or held[0] >= item.id:
            return None
        wait = (held[1] - self.clock.now()).total_seconds()
        if wait <= 0:  # its time came: it is claimed first (lower id), or went elsewhere
            del self._held[item.request_id]
            return None
        return Retry(wait, f"waits for item {held[0]}, which is ahead of it", waiting=True)

    def _hold(self, item: OutboxItem, result: Result, now: datetime) -> None:
        if item.request_id is None or item.kind in UNORDERED_KINDS or item.id is None:
            return
        held = self._held.get(item.request_id)
        if isinstance(result, Retry):
            if held is None or held[0] >= item.id:
                self._held[item.request_id] = (item.id, now + timedelta(seconds=result.after))
            if len(self._held) > 10_000:  # forget holds whose time has passed (their item went elsewhere)
                self._held = {k: v for k, v in self._held.items() if v[1] > now}
        elif held is not None and held[0] == item.id:
            del self._held[item.request_id]

    async def _finish(self, item: OutboxItem, result: Result) -> None:
        assert item.id is not None
        now = self.clock.now()
        self._hold(item, result, now)
        for attempt in range(3):
            try:
                await self.rows.finish(item, result, now)  # in the next group of results (docstring)
                break
            except Exception:
                log.exception("could not record outbox result for item %s (try %s)", item.id, attempt + 1)
                if attempt == 2:
                    return  # the lease expires and the sweep retries the item; handlers check before acting
        if isinstance(result, Retry):
            self._note_due(now + timedelta(seconds=result.after))
        label = type(result).__name__.lower()
        self.metrics.outbox_deliveries.labels(item.kind, label).inc()
        self._report(item, result)

    def on_card_stored(self, fn: Callable[[CardPosted, datetime], None]) -> None:
        """Run `fn(card, when)` for each card ts a delivery's result stored, once it committed."""
        self._card_listeners.append(fn)

    def _cards_stored(self, cards: Sequence[tuple[CardPosted, datetime]]) -> None:
        for card, at in cards:
            for fn in self._card_listeners:
                try:
                    fn(card, at)
                except Exception:  # like after-commit hooks: never undo what committed
                    log.exception("card-stored hook failed", extra={"request_id": card.request_id})

    def _report(self, item: OutboxItem, result: Result) -> None:
        """One WARNING when an item first fails, one INFO when it then gets through, one ERROR when it
        gives up (with the fix, when the handler knows it). Kept per process, in memory."""
        assert item.id is not None
        extra = {"outbox_item": item.id, "kind": item.kind, "request_id": item.request_id}
        if isinstance(result, Dead):
            self._failing.discard(item.id)
            log.error("%s for %s gave up: %s", item.kind, item.request_id or f"item {item.id}",
                      result.line or result.error, extra=extra)
        elif isinstance(result, Retry):
            if not result.waiting and item.id not in self._failing:
                self._failing.add(item.id)
                log.warning("%s for %s failed, retrying in %.1f s: %s", item.kind,
                            item.request_id or f"item {item.id}", result.after, result.error, extra=extra)
        elif item.id in self._failing:
            self._failing.discard(item.id)
            log.info("%s for %s delivered after %d attempts", item.kind, item.request_id or f"item {item.id}",
                     item.attempts, extra=extra)
