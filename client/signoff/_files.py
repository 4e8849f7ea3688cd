"""Bounded reads of files named by input the agent side does not control: a hook's `transcript_path`,
a tool call's `file_path`.

Invariants:
- Only regular files are read. A FIFO, a device, a socket or a directory is refused without a read:
  checked with `stat` before opening, then opened non-blocking (opening a FIFO nobody writes to
  never waits) and checked again with `fstat` on what was opened (a swap in between is caught).
- At most `max_bytes` are read (the head of the file, or its tail), in chunks, and reading gives up
  at a deadline.
- Every problem is None: the caller treats the file as unreadable, never as empty.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass

CHUNK = 1 << 16
READ_SECONDS = 2.0  # a regular file this small reads in milliseconds; a stalled file system must not hold us
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class Tail:
    """The last bytes of a file: `data` starts at byte `start` of it (0: the whole file)."""

    data: bytes
    start: int


def _open_regular(path: str) -> int | None:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        fd = os.open(path, _FLAGS)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _read(fd: int, offset: int, limit: int, seconds: float) -> bytes | None:
    deadline = time.monotonic() + seconds
    chunks: list[bytes] = []
    got = 0
    while got < limit:
        if time.monotonic() > deadline:
            return None
        chunk = os.pread(fd, min(CHUNK, limit - got), offset + got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_head(path: str, max_bytes: int, *, seconds: float = READ_SECONDS) -> bytes | None:
    """The whole of a regular file of at most `max_bytes`; None for a larger one or any problem."""
    fd = _open_regular(path)
    if fd is None:
        return None
    try:
        data = _read(fd, 0, max_bytes + 1, seconds)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if data is not None and len(data) <= max_bytes else None


def read_tail(path: str, max_bytes: int, *, seconds: float = READ_SECONDS) -> Tail | None:
    """At most the last `max_bytes` of a regular file; None on any problem."""
    fd = _open_regular(path)
    if fd is None:
        return None
    try:
        start = max(0, os.fstat(fd).st_size - max_bytes)
        data = _read(fd, start, max_bytes, seconds)
    except OSError:
        return None
    finally:
        os.close(fd)
    return Tail(data, start) if data is not None else None
