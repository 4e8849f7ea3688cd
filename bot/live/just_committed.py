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
At most `cap` requests are held, the oldest dropped first (an item another replica delivered
never takes its request): memory does not grow with the number of pending requests.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from bot.domain.model import Request
from bot.domain.outbox import OutboxItem

CAP = 1024


class Fresh:
    def __init__(self, cap: int = CAP) -> None:
        self.cap = cap
        self._held: OrderedDict[str, Request] = OrderedDict()
        self.taken = 0  # deliveries that rendered without a read (tests and metrics look)

    def __len__(self) -> int:
        return len(self._held)

    def put(self, key: str, request: Request) -> None:
        """`request` as committed by the unit that enqueued the item whose dedupe key is `key`."""
        self._held[key] = request
        self._held.move_to_end(key)
        while len(self._held) > self.cap:
            self._held.popitem(last=False)

    def take(self, item: OutboxItem, usable: Callable[[Request], bool] = lambda _: True) -> Request | None:
        """The request to render for `item`, if its own commit left it here (see the module's note) and
        it is `usable` for the handler."""
        request = self._held.pop(item.dedupe_key, None)
        if request is None or item.attempts != 1 or request.id != item.request_id or not usable(request):
            return None
        self.taken += 1
        return request
