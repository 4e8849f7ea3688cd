"""Injectable time and ids: production defaults here, tests pass their own."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class FileClock:
    """TEST ONLY: the time is whatever ISO-8601 instant the file at `path` holds.

    Selected by the test-only setting SIGNOFF_CLOCK_FILE, so a test can move the clock of
    `signoff serve` subprocesses (kill -9 and multi-replica tests of reminders and timeouts).
    Production never sets it; `bot.process.app.build` logs a warning when it is used. Writers should
    replace the file atomically (write a temporary file, then rename); a half-written file
    reads as the last good value.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._last: datetime | None = None
        self._last = self.now()  # a missing or malformed file fails at start, not at the first sweep

    def now(self) -> datetime:
        try:
            value = datetime.fromisoformat(self.path.read_text().strip().replace("Z", "+00:00"))
        except (OSError, ValueError):
            if self._last is None:
                raise ValueError(f"test clock file {self.path} does not hold an ISO-8601 time") from None
            return self._last
        self._last = value if value.tzinfo else value.replace(tzinfo=UTC)
        return self._last


def new_id(prefix: str) -> str:
    """A sortable unique id: prefix + 48-bit millisecond time + 80 random bits (ULID layout)."""
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return f"{prefix}_{''.join(reversed(chars)).lower()}"
