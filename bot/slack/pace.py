"""Slack's pace: `chat.postMessage` allows about one message per second per channel.

The outbox asks `ChannelPace` before each post: a channel whose next slot is more than a moment
away gets its item rescheduled for that slot (the attempt did nothing; the dispatcher's slots go to
other channels), a slot within `INLINE_WAIT_SECONDS` is waited for in place. A 429 pushes back only
its own channel, by Slack's Retry-After. So a burst of 100 requests into one channel posts 100
cards one after another without a storm of 429 retries, and a rate-limited channel delays no other.

The pace is per process (each replica paces its own posts; Slack's 429s still settle the rest).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from bot.clock import Clock

DEFAULT_INTERVAL_SECONDS = 1.0  # SIGNOFF_SLACK_CHANNEL_PACE_SECONDS
INLINE_WAIT_SECONDS = 0.25
PACED_METHODS = frozenset({"chat.postMessage"})


class ChannelPace:
    def __init__(self, clock: Clock, interval: float = DEFAULT_INTERVAL_SECONDS) -> None:
        self.clock = clock
        self.interval = timedelta(seconds=interval)
        self._next: dict[str, datetime] = {}

    def wait_for(self, channel: str) -> float:
        """0 and the slot taken if `channel` may be posted to now; else the seconds until its slot."""
        now = self.clock.now()
        free = self._next.get(channel)
        if free is not None and free > now:
            return (free - now).total_seconds()
        self._next[channel] = now + self.interval
        if len(self._next) > 10_000:  # forget channels whose slots have passed
            self._next = {c: t for c, t in self._next.items() if t > now}
        return 0.0

    def rate_limited(self, channel: str, retry_after: float) -> None:
        """Slack said 429 for `channel`: nothing goes there before Retry-After."""
        until = self.clock.now() + timedelta(seconds=retry_after)
        self._next[channel] = max(self._next.get(channel, until), until)
