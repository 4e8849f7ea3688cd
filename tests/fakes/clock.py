"""Clocks a test moves by hand: in this process (`FakeClock`), or for `signoff serve` subprocesses
through the test-only SIGNOFF_CLOCK_FILE setting (`ClockFile`, read by bot.process.clock.FileClock)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

T0 = datetime(2030, 1, 7, 9, 0, tzinfo=UTC)


class FakeClock:
    """Stands still until the test moves it."""

    def __init__(self, start: datetime = T0) -> None:
        self._now = start

    def now(self) -> datetime:
        return self._now

    def advance(self, **delta: float) -> datetime:
        self._now += timedelta(**delta)
        return self._now


class ClockFile:
    """The time every subprocess started with SIGNOFF_CLOCK_FILE=`path` reads."""

    def __init__(self, path: Path, start: datetime = T0) -> None:
        self.path = path
        self.set(start)

    def set(self, at: datetime) -> None:
        self._now = at
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(at.isoformat())
        os.replace(tmp, self.path)  # atomic: a reader never sees half a time

    def now(self) -> datetime:
        return self._now

    def advance(self, **delta: float) -> datetime:
        self.set(self._now + timedelta(**delta))
        return self._now
