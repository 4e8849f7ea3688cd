"""Fault injection: answer a method's next calls with an HTTP error, a Slack error, a delay, never, or
a dropped connection.

Faults are queued per method and consumed first in, first out; delays are a separate queue, so a
delay combines with a following fault.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Any


@dataclass
class Fault:
    kind: str  # "fail" | "error" | "hang" | "drop"
    remaining: int
    status: int = 200
    retry_after: int | None = None
    error: str = ""
    apply: bool = False


@dataclass
class Delay:
    seconds: float
    remaining: int | None




class Faults:
    """The fault queues of an emulator (a mixin of ``SlackEmulator``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._faults: dict[str, deque[Fault]] = {}
        self._delays: dict[str, deque[Delay]] = {}
        self._release = asyncio.Event()
        self.post_interval: float | None = None  # see pace()
        self._last_post: dict[str, float] = {}

    def fail(self, method: str, *, status: int, times: int = 1, retry_after: int | None = None) -> None:
        """Answer the next ``times`` calls with HTTP ``status`` and no effect."""
        self._faults.setdefault(method, deque()).append(Fault("fail", times, status=status, retry_after=retry_after))

    def error(self, method: str, error: str, *, times: int = 1) -> None:
        """Answer the next ``times`` calls with HTTP 200 ``{"ok": false, "error": error}`` and no effect."""
        self._faults.setdefault(method, deque()).append(Fault("error", times, error=error))

    def drop(self, method: str, *, times: int = 1) -> None:
        """Close the connection of the next ``times`` calls without an answer and with no effect (the
        client sees the server disconnect, as when a proxy or the network drops it)."""
        self._faults.setdefault(method, deque()).append(Fault("drop", times))

    def delay(self, method: str, seconds: float, *, times: int | None = None) -> None:
        """Wait ``seconds`` before handling the next ``times`` calls (None: every call)."""
        self._delays.setdefault(method, deque()).append(Delay(seconds, times))

    def hang(self, method: str, *, apply: bool = False, times: int = 1) -> None:
        """Never answer the next ``times`` calls until ``release_hung()``/``stop()``.

        ``apply=True`` performs the call's effect before withholding the answer.
        A released call is answered with its real answer if applied, else with
        ``{"ok": false, "error": "fake_released"}``.
        """
        self._faults.setdefault(method, deque()).append(Fault("hang", times, apply=apply))

    def release_hung(self) -> None:
        """Let every currently hung request answer."""
        release, self._release = self._release, asyncio.Event()
        release.set()

    def clear_faults(self) -> None:
        """Drop all queued faults and delays."""
        self._faults.clear()
        self._delays.clear()

    def _take(self, queues: dict[str, deque[Any]], method: str) -> Any:
        queue = queues.get(method)
        if not queue:
            return None
        item = queue[0]
        if item.remaining is not None:
            item.remaining -= 1
            if item.remaining <= 0:
                queue.popleft()
        return item


    def pace(self, seconds: float | None = 1.0) -> None:
        """Enforce Slack's posting pace: one chat.postMessage per channel every ``seconds`` (None: off).

        A post that comes sooner is answered like Slack: HTTP 429 ``ratelimited`` with ``Retry-After``
        (whole seconds, at least 1) and no effect.
        """
        self.post_interval = seconds
        self._last_post.clear()

    def _paced(self, method: str, args: dict[str, Any]) -> int | None:
        """Seconds to wait if this call breaks the posting pace; records the post otherwise."""
        if self.post_interval is None or method != "chat.postMessage":
            return None
        channel = str(args.get("channel") or "")
        now = time.monotonic()
        last = self._last_post.get(channel)
        if last is not None and now - last < self.post_interval:
            return max(1, math.ceil(self.post_interval - (now - last)))
        self._last_post[channel] = now
        return None
