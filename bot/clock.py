"""Injectable time and ids: production defaults here, tests pass their own."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import Protocol

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


def new_id(prefix: str) -> str:
    """A sortable unique id: prefix + 48-bit millisecond time + 80 random bits (ULID layout)."""
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return f"{prefix}_{''.join(reversed(chars)).lower()}"
