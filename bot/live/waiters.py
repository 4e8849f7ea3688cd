"""Wake-ups for waiting long-polls: pushed, never a sleep loop on the decision path.

- In one process: an asyncio.Event per waiter, set right after the deciding
  transaction commits (`Waiters.wake`).
- Across processes: bot/approvals/foreign_changes.py's `CrossProcessWatcher` wakes them when
  another process changed what they wait on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from typing import Any


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
        self.closing = False  # the server is shutting down: long-polls answer with what they have

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

    def close(self) -> None:
        """Shutting down: every long-poll answers now with the state it has (the client polls again, on
        another replica or after the restart) instead of holding the shutdown for up to its wait."""
        self.closing = True
        self.wake_all()

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
