"""The use cases on approval requests in one object: submit, decide, cancel, wait. The only caller of storage.

`Service` puts together the use cases, each in the module named for it: the guarded change they all
make (bot/approvals/changes.py), submit (bot/approvals/submit.py), decide (bot/approvals/decide.py);
waiting for a decision is here. Timers, batches, grants, outcomes and the policy gate are beside it
in bot/approvals/ and act through it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from datetime import datetime

from bot.approvals.access import Access, Directory
from bot.approvals.decide import Deciding
from bot.approvals.reads import Reads
from bot.approvals.stats import Stats
from bot.approvals.submit import SubmitGate as SubmitGate, Submitting
from bot.approvals.types import (ApprovalSpec as ApprovalSpec, DecideResult as DecideResult, Guarded as Guarded,
                                LostRace as LostRace, StaleCheck as StaleCheck)
from bot.approvals.undo import UndoWindow
from bot.domain.delivery_state import is_undelivered
from bot.domain.model import Request, Status
from bot.domain.timing import Timing
from bot.live.just_committed import Fresh
from bot.live.pending_states import Known
from bot.live.waiters import InFlight, Waiters
from bot.process.clock import Clock, SystemClock, new_id
from bot.process.metrics import Metrics
from storage.base import Store

log = logging.getLogger(__name__)

MAX_WAIT_SECONDS = 60.0


class Service(Submitting, Deciding):
    """Every use case on approval requests, on one store; the parts they share are made here."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        waiters: Waiters | None = None,
        directory: Directory | None = None,
        id_factory: Callable[[str], str] = new_id,
        metrics: Metrics | None = None,
        default_timing: Timing | None = None,
        gate: SubmitGate | None = None,
        access: Access | None = None,
        max_pending: int | None = None,
    ) -> None:
        self.store = store
        self.reads = Reads(store)  # what the edges read (they write only through the use cases)
        self.max_pending = max_pending  # per API token (SIGNOFF_MAX_PENDING_PER_TOKEN); None: no cap
        self._staging = Counter()  # per token: pending requests counted, not committed yet
        self.metrics = metrics or Metrics()
        self.clock = clock or SystemClock()
        self.waiters = waiters or Waiters()
        self.directory = directory
        self.access = access or Access(directory)
        self.new_id = id_factory
        self._on_decided = []
        self.default_timing = default_timing
        self.gate = gate  # policy, grants and delegation at submit (bot/approvals/gate.py)
        self.fresh = Fresh(now=self.clock.now)  # requests as committed here, for the card delivery the commit enqueued
        self.known = Known()  # pending requests as last committed here, for a click's check (bot/live/pending_states.py)
        self.in_flight = InFlight(self.waiters)  # decisions being written here, for `wait`
        self.undo_window = UndoWindow(self)
        # Time to decide (bot/approvals/stats.py); a first view stamped is read afresh by the next click here.
        self.stats = Stats(store, self.metrics, self.clock, stamped=self.known.forget)
        self.on_decided(self.stats.decided)  # approvals held in their tier's undo window (bot/approvals/undo.py)

    async def wait(
        self, request_id: str, timeout: float, *, check: Callable[[Request], object] | None = None
    ) -> Request:
        """Return as soon as the request leaves `pending` or its card is known undeliverable (nobody
        will see it: bot.domain.delivery_state), or when `timeout` seconds pass (not before).

        `check(request)` runs on the first read, before any waiting (it raises to refuse the caller).
        A decision committed in this process hands the decided request to the waiter (what it wrote
        is what a read would return), so a woken long-poll answers without reading it back. A wake-up
        while this process is deciding the request is not read on either: on PostgreSQL the decision's
        own NOTIFY can reach the listener before the decision's result reaches its writer; the decision
        hands over the request when it commits, or, if it writes nothing, wakes the waiter to read.
        """
        if timeout <= 0:
            request = await self.get(request_id)
            if check is not None:
                check(request)
            return request
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(timeout, MAX_WAIT_SECONDS)
        # Register before reading: a decision committed after the read still wakes us. A wake-up for
        # anything else (a reminder, an escalation, a snooze) is not an answer: read again, wait on.
        with self.waiters.register(request_id) as event:
            request = await self.get(request_id)
            if check is not None:
                check(request)
            while True:
                remaining = deadline - loop.time()
                if not request.is_pending or is_undelivered(request) or remaining <= 0 or self.waiters.closing:
                    return request
                try:
                    # Not wait_for: it wraps the wait in a task of its own, one more turn of the event loop
                    # after the wake-up, in which the outbox's Slack calls for the same decision ran first.
                    async with asyncio.timeout_at(deadline):
                        await event.wait()
                except TimeoutError:
                    return await self.get(request_id)
                settled = event.settled
                event.clear()
                if settled is None and loop.time() < deadline and self.in_flight.hold(request_id):
                    continue  # this process's decision of it is in flight: it hands it over, or wakes us again
                if settled is None:
                    self.metrics.longpoll_rereads.inc()
                request = settled if settled is not None else await self.get(request_id)

    async def list(
        self, *, status: Status | None, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[Request]:
        return await self.store.list_requests(status=status, limit=limit, after=after)
