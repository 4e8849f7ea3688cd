"""How fast a waiting client may ask again: the bound on every loop the agent side runs. No I/O here.

Invariants:
- Waiting is long-polling: a poll that the server held for its whole wait is followed by the next at
  once (that is one request per `MAX_LONG_POLL` seconds, about 1.2 a minute).
- A poll that came back early while the request is still pending (a proxy that cuts long requests, a
  server that does not hold them) is never followed at once: polls then start at least
  `MIN_POLL_INTERVAL` apart, and the gap doubles with each early return in a row up to
  `MAX_POLL_BACKOFF`, with jitter so that many clients do not ask in step.
- A failed call (connection refused while the server restarts, a 5xx, a 429) is retried after a
  jittered backoff (`FIRST_BACKOFF` doubling to `MAX_BACKOFF`) and never sooner than the server's
  `Retry-After`, even when that says 0.
"""

from __future__ import annotations

import random

import httpx2

FIRST_BACKOFF, MAX_BACKOFF = 0.2, 5.0  # retries of a failed call
MIN_POLL_INTERVAL, MAX_POLL_BACKOFF = 1.0, 30.0  # long-polls that came back early, request still pending
HELD = 0.9  # a long-poll back after this share of its wait counts as having waited


def jittered(pause: float) -> float:
    """Between half of `pause` and all of it ("equal jitter"): clients that failed together spread out."""
    return pause / 2 + random.uniform(0.0, pause / 2)


def retry_after(response: httpx2.Response | None) -> float | None:
    """The server's Retry-After in seconds (delta-seconds only), or None when it gave none."""
    if response is None:
        return None
    try:
        return max(0.0, float(response.headers.get("Retry-After", "")))
    except ValueError:
        return None


def retry_pause(response: httpx2.Response | None, backoff: float) -> float:
    """The pause before retrying a failed call: the jittered backoff, or the server's Retry-After if longer."""
    own = max(FIRST_BACKOFF / 2, jittered(backoff))
    asked = retry_after(response)
    return own if asked is None else max(asked, own)


def next_backoff(backoff: float) -> float:
    return min(backoff * 2, MAX_BACKOFF)


class PollPace:
    """The pause before the next long-poll of a request that is still pending (one per wait)."""

    def __init__(self) -> None:
        self.early = 0  # long-polls in a row that came back before their wait

    def pause(self, asked: float, took: float) -> float:
        """`asked`: the wait the last poll asked the server for; `took`: seconds since it was sent."""
        if took >= asked * HELD:
            self.early = 0
            return 0.0
        self.early += 1
        gap = min(MIN_POLL_INTERVAL * 2 ** self.early, MAX_POLL_BACKOFF)
        return max(0.0, max(MIN_POLL_INTERVAL, jittered(gap)) - took)
