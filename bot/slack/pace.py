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
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from bot.clock import Clock

DEFAULT_INTERVAL_SECONDS = 1.0  # SIGNOFF_SLACK_CHANNEL_PACE_SECONDS
INLINE_WAIT_SECONDS = 0.25
FLIGHT = timedelta(seconds=30)  # longer than a Slack call may take (its timeout)
PACED_METHODS = frozenset({"chat.postMessage"})


class SharedPace(Protocol):
    async def take(self, channel: str, clock: Callable[[], datetime], interval: timedelta) -> datetime | None:
        """None if the caller took the slot (at `clock()` once it may write); else when the next slot frees."""

    async def hold(self, channel: str, until: datetime) -> None:
        """Nothing goes to `channel` before `until`."""


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

    async def wait_for(self, channel: str) -> float:
        """0 and the slot taken if `channel` may be posted to now; else the seconds until its slot."""
        now = self.clock.now()
        flying = self._flying.get(channel)
        if flying is not None and now - flying < FLIGHT:
            return max(self.interval.total_seconds() / 2, 0.001)  # asked again once the answer is likely in
        free = self._next.get(channel)
        if free is not None and free > now:
            return (free - now).total_seconds()
        if self.shared is not None and self.interval > timedelta(0):
            free = await self.shared.take(channel, self.clock.now, self.interval)
            now = self.clock.now()  # after the write: the interval runs from when the post can go
            known = self._next.get(channel)
            if free is not None:  # another replica (or another of our deliveries) has this slot
                # Never earlier than what this process already knows: a slot taken here whose
                # write was slow to commit must keep its full interval from our other deliveries.
                free = max(free, known) if known is not None else free
                self._next[channel] = free
                return max((free - now).total_seconds(), 0.001)
            if known is not None and known > now:  # one of our own deliveries posted meanwhile
                return (known - now).total_seconds()
        self._next[channel] = now + self.interval
        if self.interval > timedelta(0):
            self._flying[channel] = now
        if len(self._next) > 10_000:  # forget channels whose slots have passed
            self._next = {c: t for c, t in self._next.items() if t > now}
        return 0.0

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
