"""Durations as people write them in an API body or a setting: `90s`, `15m`, `4h`, `2d`, `1h30m`.

Pure: `parse_duration` turns text into a `timedelta` or raises `DurationError` with a message
that says what is accepted; `format_duration` writes one back in the same style ("4h", "1h 30m").
"""

from __future__ import annotations

import re
from datetime import timedelta

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX = timedelta(days=365)
_PART = re.compile(r"(\d{1,7})([smhd])")
_WHOLE = re.compile(r"^(?:\d{1,7}[smhd])+$")
HINT = "use a whole number and a unit: 90s, 15m, 4h, 2d (or combined, like 1h30m)"


class DurationError(ValueError):
    """Text that is not a duration we accept."""


def parse_duration(text: object) -> timedelta:
    """`"15m"` -> 15 minutes. Raises DurationError for anything else (blank, `15`, `-5m`, `1.5h`, `0s`)."""
    if not isinstance(text, str):
        raise DurationError(f"{text!r} is not a duration; {HINT}")
    raw = text.strip().lower()
    if not _WHOLE.match(raw):
        raise DurationError(f"{text[:40]!r} is not a duration; {HINT}")
    seconds = sum(int(n) * UNITS[unit] for n, unit in _PART.findall(raw))
    if seconds <= 0:
        raise DurationError(f"{text[:40]!r} is zero; a duration must be at least 1s")
    value = timedelta(seconds=seconds)
    if value > MAX:
        raise DurationError(f"{text[:40]!r} is longer than the maximum of 365d")
    return value


def format_duration(value: timedelta) -> str:
    """4h, 1h 30m, 2d 3h, 45s: the two largest non-zero units, for people to read."""
    seconds = int(value.total_seconds())
    if seconds <= 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return " ".join(parts[:2])


def compact(value: timedelta) -> str:
    """The exact duration in the input syntax, so it parses back to itself: 5400s -> "1h30m"."""
    seconds = int(value.total_seconds())
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"
