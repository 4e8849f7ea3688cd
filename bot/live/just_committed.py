"""Requests as this process just committed them, for the delivery their commit enqueued.

A card's post and a decision's card update used to read the request back from the database
before rendering it, though the unit that enqueued the item had just written exactly that
state (a read on SQLite after a write revalidates the reader's page cache; on PostgreSQL it is
a round trip). The unit's after-commit hook puts the request it committed here, under the
dedupe key of the item it enqueued; the item's handler takes it instead of reading.

Why that is the same truth as a read (the outbox's invariant, bot/slack/delivery.py): every write
that changes what a card shows enqueues a card update of its own, delivered after this item
(a request's items go in order). A handler's read could be overtaken by such a write just as
well; the later item renders the later state. So the state this item's own write committed is
all it owes.

One write enqueues no update: the card's ts, stored when the post went out. It is the one thing a
state committed before the post cannot know, and a card update needs it (without a ts the update
takes the card for not posted, or given up). So a card update takes only a request with its card's
ts (once stored, a ts never changes); a decision committed before its card went out is read back.

Taken only:
- by the item the same commit enqueued (its dedupe key), once (taken out);
- on that item's first attempt: a retry, or an item another process tried first, reads (an
  earlier attempt may have posted the card; its ts would be in the row, not here).
At most `cap` requests are held, the oldest dropped first, and none longer than `max_age`: an item
another replica delivered never takes its request, and with two replicas about one in ten requests
left one here (a card post or a decision's card update the other's dispatcher claimed first), so the
cap alone let memory grow for thousands of requests (bench.soak). An item is claimed as soon as its
commit wakes the dispatcher; one whose first attempt comes later than `max_age` (a long backlog, a
channel's queue) reads its request, as a retry does. So memory grows neither with the number of
pending requests nor with the requests other replicas deliver.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from bot.domain.model import Request
from bot.domain.outbox import OutboxItem

CAP = 1024
MAX_AGE = timedelta(minutes=2)  # two outbox leases (bot/outbox/dispatcher.py)


class Fresh:
    def __init__(self, cap: int = CAP, max_age: timedelta = MAX_AGE,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.cap = cap
        self.max_age = max_age
        self.now = now
        self._held: OrderedDict[str, tuple[Request, datetime]] = OrderedDict()  # oldest first
        self.taken = 0  # deliveries that rendered without a read (tests and metrics look)

    def __len__(self) -> int:
        return len(self._held)

    def put(self, key: str, request: Request) -> None:
        """`request` as committed by the unit that enqueued the item whose dedupe key is `key`."""
        now = self.now()
        self._held[key] = (request, now)
        self._held.move_to_end(key)
        while len(self._held) > self.cap:
            self._held.popitem(last=False)
        while self._held:  # those no delivery here took in time (the front is the oldest put)
            oldest = next(iter(self._held))
            if now - self._held[oldest][1] <= self.max_age:
                break
            del self._held[oldest]

    def take(self, item: OutboxItem, usable: Callable[[Request], bool] = lambda _: True) -> Request | None:
        """The request to render for `item`, if its own commit left it here (see the module's note) and
        it is `usable` for the handler."""
        found = self._held.pop(item.dedupe_key, None)
        request = found[0] if found is not None else None
        if request is None or item.attempts != 1 or request.id != item.request_id or not usable(request):
            return None
        self.taken += 1
        return request
