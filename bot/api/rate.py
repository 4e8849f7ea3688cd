"""Per-token submit rate (a token bucket each): one token's flood is answered 429, not queued.

In memory, per process: behind N replicas a token gets at most N times the rate, which still bounds
it. The bucket holds `burst` submits and refills at `rate` a second; an empty bucket answers
`TooManySubmits` with the seconds until the next submit would be accepted (Retry-After).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from bot.errors import SignoffError


class TooManySubmits(SignoffError):
    code = "too_many_requests"
    status = 429


class SubmitRate:
    def __init__(self, rate: float, burst: int, now: Callable[[], float] = time.monotonic, *,
                 what: str = "submits", doing: str = "submits") -> None:
        self.what, self.doing = what, doing  # what is counted and the token's doing, as the 429 names them
        self.rate = rate
        self.burst = burst
        self.now = now
        self._buckets: dict[str, tuple[float, float]] = {}  # token name -> (submits left, when counted)

    def take(self, who: str) -> None:
        """Count one submit of `who`; TooManySubmits (429, Retry-After) if its bucket is empty."""
        now = self.now()
        left, at = self._buckets.get(who, (float(self.burst), now))
        left = min(float(self.burst), left + (now - at) * self.rate)
        if left < 1:
            self._buckets[who] = (left, now)
            wait = max(1, math.ceil((1 - left) / self.rate))
            error = TooManySubmits(
                f"this token {self.doing} faster than {self.rate:g} a second (bursts of {self.burst}); "
                f"retry in {wait} s",
                details=[{"field": "Authorization", "message": f"at most {self.rate:g} {self.what} a second per token"}])
            error.retry_after = wait
            raise error
        self._buckets[who] = (left - 1, now)
