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

    async def wait_for(self, channel: str) -> float:
        """0 and the slot taken if `channel` may be posted to now; else the seconds until its slot."""
        now = self.clock.now()
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
        if len(self._next) > 10_000:  # forget channels whose slots have passed
            self._next = {c: t for c, t in self._next.items() if t > now}
        return 0.0

    async def rate_limited(self, channel: str, retry_after: float) -> None:
        """Slack said 429 for `channel`: nothing goes there before Retry-After (from any replica)."""
        until = self.clock.now() + timedelta(seconds=retry_after)
        self._next[channel] = max(self._next.get(channel, until), until)
        if self.shared is not None:
            await self.shared.hold(channel, until)
