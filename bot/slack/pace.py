"""Slack's pace: `chat.postMessage` allows about one message per second per channel.

The outbox asks `ChannelPace` before each post: a channel whose next slot is more than a moment
away gets its item rescheduled for that slot (the attempt did nothing; the dispatcher's slots go to
other channels), a slot within `INLINE_WAIT_SECONDS` is waited for in place. A 429 pushes back only
its own channel, by Slack's Retry-After. So a burst of 100 requests into one channel posts 100
cards one after another without a storm of 429 retries, and a rate-limited channel delays no other.

With a `SharedPace` (the database's `channel_pace` rows, storage/pace_store.py) the slots are
shared by every replica: a slot is taken with one guarded write, so two replicas posting to one
channel together stay at its pace. Each process remembers the slots it learnt of, so a channel
that is waiting costs no database write until its slot comes.

Waiting callers queue per channel (`key`: the outbox item's id, `bot.outbox.dispatcher.delivering`), in the
order their items were enqueued: each is given its own turn, one interval after the one ahead of it,
and nobody new goes ahead of them. So a backlog of N cards in one channel is put back once or twice
per card (twice when the posts ahead of it ran late and it came back early), and the cards appear in
the order they were asked for. (Given only the channel's next slot, every waiting card came back at
every slot: with 1,500 cards queued in one channel an idle server spent 60-75 % of a core claiming,
rendering and putting them back again while one card a second went out; now about 1 %.) One further
back whose turn came while the one ahead of it is late by more than an interval and `GRACE` (it
went to another replica, or needs no post any more) goes first; a key not back `STALE` after its
turn is forgotten. While a delivery here takes a slot in the database, others for that channel queue.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import Protocol

from bot.process.clock import Clock

DEFAULT_INTERVAL_SECONDS = 1.0  # SIGNOFF_SLACK_CHANNEL_PACE_SECONDS
INLINE_WAIT_SECONDS = 0.25
FLIGHT = timedelta(seconds=30)  # longer than a Slack call may take (its timeout)
PACED_METHODS = frozenset({"chat.postMessage"})
STALE = FLIGHT
GRACE = timedelta(seconds=1)
_SOON = timedelta(milliseconds=1)

# Whom the post being delivered is for: (its risk's rank, 0 = critical first; the agent's token), set by
# the card post. With it, a channel's queue is ordered by (rank, round, item id): a critical card goes
# before every lower one, and each token's n-th waiting card of a rank (its round) before any token's
# (n+1)-th, so one token's backlog holds another's card back by one card each at most.
posting_for: ContextVar[tuple[int, str | None] | None] = ContextVar("signoff_posting_for", default=None)


class SharedPace(Protocol):
    async def take(self, channel: str, clock: Callable[[], datetime], interval: timedelta) -> datetime | None:
        """None if the caller took the slot (at `clock()` once it may write); else when the next slot frees."""

    async def hold(self, channel: str, until: datetime) -> None:
        """Nothing goes to `channel` before `until`."""


def _place(queue: dict[Hashable, datetime], key: Hashable, turn: datetime) -> None:
    """`key` into `queue` in key order (an item enqueued earlier may ask later: deliveries run at once)."""
    last = next(reversed(queue)) if queue else None
    if last is None or not _before(key, last):
        queue[key] = turn
        return
    entries = list(queue.items())
    queue.clear()
    for other, when in entries:
        if key not in queue and _before(key, other):
            queue[key] = turn
        queue[other] = when


def _before(a: Hashable, b: Hashable) -> bool:
    try:
        return bool(a < b)  # type: ignore[operator]
    except TypeError:
        return False


class ChannelPace:
    def __init__(
        self, clock: Clock, interval: float = DEFAULT_INTERVAL_SECONDS, shared: SharedPace | None = None,
    ) -> None:
        self.clock = clock
        self.interval = timedelta(seconds=interval)
        self.shared = shared
        self._next: dict[str, datetime] = {}
        # channel -> when its post in flight took its slot: the next waits for its answer (`sent`), at most
        # FLIGHT (a call that never reports back does not hold its channel for longer).
        self._flying: dict[str, datetime] = {}
        # channel -> the keys waiting for it, in their order, each with its turn (see the module docstring)
        self._queues: dict[str, dict[Hashable, datetime]] = {}
        self._taking: set[str] = set()  # channels whose slot a delivery here is taking in the database
        self._fair: dict[Hashable, tuple[int, int, Hashable, str]] = {}  # an item id -> its fair key (kept)

    def fair_key(self, channel: str, key: Hashable | None) -> Hashable | None:
        """`key` (an item id) as `posting_for` places it in `channel`'s queue; itself without one."""
        who = posting_for.get()
        if key is None or who is None:
            return key
        known = self._fair.get(key)
        if known is not None:
            return known
        rank, owner = who
        owner = owner or ""
        queue = self._queues.get(channel, {})
        same = sum(1 for k in queue if isinstance(k, tuple) and k[0] == rank and k[3] == owner)
        fair = self._fair[key] = (rank, same, key, owner)
        if len(self._fair) > 10_000:  # keys that went elsewhere: forget the oldest half
            for old in list(self._fair)[:5_000]:
                del self._fair[old]
        return fair

    async def wait_for(self, channel: str, key: Hashable | None = None) -> float:
        """0 and the slot taken if `channel` may be posted to now; else the seconds until the caller's turn
        (`key`: who asks, so that it keeps its place in the channel's queue when it comes back)."""
        key = self.fair_key(channel, key)
        now = self.clock.now()
        free = self._free_at(channel, now)
        queue = self._waiting(channel, now)
        if key is not None and (queue or free > now):
            turn = self._turn(queue, key, free, now)
        else:
            turn = free if free > now else None
        if turn is None and self.shared is not None and self.interval > timedelta(0):
            self._taking.add(channel)  # who asks meanwhile queues behind this one
            try:
                taken = await self.shared.take(channel, self.clock.now, self.interval)
            except BaseException:
                self._leave(channel, key)  # it asks again later, as a newcomer if it has to
                raise
            finally:
                self._taking.discard(channel)
            now = self.clock.now()  # after the write: the interval runs from when the post can go
            known = self._next.get(channel)
            if taken is not None:  # another replica (or another of our deliveries) has this slot
                # Never earlier than what this process already knows: a slot taken here whose
                # write was slow to commit must keep its full interval from our other deliveries.
                turn = self._next[channel] = max(taken, known) if known is not None else taken
            elif known is not None and known > now:  # one of our own deliveries posted meanwhile
                turn = known
            if turn is not None and key is not None:  # its place in the queue, from that slot
                turn = self._turn(self._queues.setdefault(channel, {}), key, turn, now) or turn
        if turn is not None:
            self._tidy(channel)
            return max((turn - now).total_seconds(), _SOON.total_seconds())
        self._leave(channel, key)
        self._next[channel] = now + self.interval
        if self.interval > timedelta(0):
            self._flying[channel] = now
        if len(self._next) > 10_000:  # forget channels whose slots have passed
            self._next = {c: t for c, t in self._next.items() if t > now}
        if len(self._queues) > 1_000:  # and queues whose keys all went elsewhere (a DM's, say)
            self._queues = {c: q for c, q in self._queues.items() if q and max(q.values()) >= now - STALE}
        return 0.0

    def _leave(self, channel: str, key: Hashable | None) -> None:
        """`key` out of `channel`'s queue (it posts now, or its take failed)."""
        if key is not None:
            self._queues.get(channel, {}).pop(key, None)
            if isinstance(key, tuple):
                self._fair.pop(key[2], None)
        self._tidy(channel)

    def _tidy(self, channel: str) -> None:
        if not self._queues.get(channel, True):
            del self._queues[channel]

    def _free_at(self, channel: str, now: datetime) -> datetime:
        """When this process knows `channel` may next be posted to (`now` if it may now)."""
        free = max(self._next.get(channel, now), now)
        flying = self._flying.get(channel)
        if channel in self._taking or flying is not None and now - flying < FLIGHT:
            return max(free, now + max(self.interval / 2, _SOON))  # asked again once the answer is likely in
        return free

    def _waiting(self, channel: str, now: datetime) -> dict[Hashable, datetime]:
        """`channel`'s queue, without the keys at its front that did not come back `STALE` after their turn."""
        queue = self._queues.setdefault(channel, {})  # (an empty one is dropped again by `_tidy`)
        while queue:
            first = next(iter(queue))
            if queue[first] >= now - STALE:
                break
            del queue[first]
        return queue

    def _turn(self, queue: dict[Hashable, datetime], key: Hashable, free: datetime, now: datetime) -> datetime | None:
        """When `key` is to ask again (later than `now`), written into `queue`; None if it may post now.

        Keys queue in their own order (outbox item ids: the order the posts were enqueued), whoever
        asked first. The first posts once the channel is free; each other one interval after the one
        ahead of it, unless that one is late by more than an interval and `GRACE` (it went elsewhere,
        or its delivery is stuck): then it goes when the channel is free, and the late one loses its place.
        """
        if key not in queue:
            _place(queue, key, now)
        keys = list(queue)
        at = keys.index(key)
        ahead = queue[keys[at - 1]] if at else None
        if ahead is None or ahead < now - self.interval - GRACE:
            turn = free
        else:
            turn = max(free, ahead + self.interval)
        queue[key] = previous = max(turn, now)
        for later in keys[at + 1:]:  # those behind it keep one interval each (it came in ahead of them, a 429)
            if queue[later] >= previous + self.interval:
                break
            queue[later] = previous = previous + self.interval
        return turn if turn > now else None

    def sent(self, channel: str) -> None:
        """A paced post to `channel` has just been answered (or failed). Its slot was taken before it was
        sent, and a post held up on the way (a busy event loop) may arrive late, next to the following
        one: so the following one waits for this answer, and then at least half an interval (on time,
        the answer comes well before the next slot anyway)."""
        self._flying.pop(channel, None)
        after = self.clock.now() + self.interval / 2
        if after > self._next.get(channel, after - self.interval):
            self._next[channel] = after

    async def rate_limited(self, channel: str, retry_after: float) -> None:
        """Slack said 429 for `channel`: nothing goes there before Retry-After (from any replica)."""
        until = self.clock.now() + timedelta(seconds=retry_after)
        self._next[channel] = max(self._next.get(channel, until), until)
        if self.shared is not None:
            await self.shared.hold(channel, until)
