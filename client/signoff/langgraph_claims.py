"""Durable claims: at most one resumer applies a decision to a paused thread.

A claim is a row in a small SQLite table (`signoff_resumes`), by default in the checkpointer's own
SQLite file, so every resumer that can resume a thread (it needs that checkpointer) sees it.
Rows are taken in `BEGIN IMMEDIATE` transactions: SQLite's one writer settles every race.

States: `resuming` (an owner is applying it), `done` (applied, or found applied: never again),
`failed` (the graph raised while resuming; kept with the error, not retried by itself).

Assumption, stated: resumers that share a claims file run on one machine (a SQLite file is not
shared across hosts anyway). A `resuming` row is stale, and may be taken over, when its owner's
process is gone (same host, and that pid is dead or now belongs to a process started later).
A row owned from another host is never taken over automatically.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from signoff.errors import SignoffError

SCHEMA = """CREATE TABLE IF NOT EXISTS signoff_resumes (
    key TEXT PRIMARY KEY, thread_id TEXT NOT NULL, interrupt_ids TEXT NOT NULL, state TEXT NOT NULL,
    owner TEXT NOT NULL, updated_at REAL NOT NULL, error TEXT)"""


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart; "" elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


def _alive(owner: str) -> bool:
    host, pid_text, started, _token = (owner.split("|") + ["", "", "", ""])[:4]
    if host != socket.gethostname():
        return True  # cannot tell from here: never take over another host's work
    try:
        pid = int(pid_text)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return not started or _start_time(pid) == started


@dataclass(frozen=True)
class Claim:
    key: str
    thread_id: str
    interrupt_ids: tuple[str, ...]
    state: str
    owner: str


class Claims:
    """Claims in the SQLite file at `path`. Safe to use from several threads (one connection per call)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.owner = f"{socket.gethostname()}|{os.getpid()}|{_start_time(os.getpid())}|{uuid.uuid4().hex[:12]}"
        with self._tx() as db:
            db.execute(SCHEMA)

    @classmethod
    def beside(cls, checkpointer: Any) -> Claims:
        """Claims in the checkpointer's own SQLite file (a SqliteSaver); anything else must pass `claims=`."""
        conn = getattr(checkpointer, "conn", None)
        if isinstance(conn, sqlite3.Connection):
            try:
                files = [row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"]
            except sqlite3.Error:
                files = []
            if files and files[0]:
                return cls(files[0])
        raise SignoffError("the Resumer keeps its claims beside a SqliteSaver's file; for this checkpointer pass "
                           "claims=Claims('/path/to/claims.db') (one file every resumer of these threads shares)")

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()

    def claim(self, key: str, thread_id: str, interrupt_ids: Sequence[str]) -> bool:
        """Take `key` for this owner: True if it was free, or held by a process that is gone."""
        with self._tx() as db:
            row = db.execute("SELECT state, owner FROM signoff_resumes WHERE key = ?", (key,)).fetchone()
            if row is None:
                db.execute("INSERT INTO signoff_resumes VALUES (?, ?, ?, 'resuming', ?, ?, NULL)",
                           (key, thread_id, json.dumps(list(interrupt_ids)), self.owner, time.time()))
                return True
            state, owner = row
            if state != "resuming" or owner == self.owner or _alive(owner):
                return False
            db.execute("UPDATE signoff_resumes SET owner = ?, updated_at = ? WHERE key = ? AND owner = ?",
                       (self.owner, time.time(), key, owner))
            return True

    def finish(self, key: str, *, error: str | None = None) -> None:
        """Mark `key` applied (`done`) or, with `error`, `failed`; only by its owner."""
        with self._tx() as db:
            db.execute("UPDATE signoff_resumes SET state = ?, error = ?, updated_at = ? WHERE key = ? AND owner = ?",
                       ("failed" if error else "done", error, time.time(), key, self.owner))

    def release(self, key: str) -> None:
        """Give `key` back untouched (nothing was applied): the next resumer claims it afresh."""
        with self._tx() as db:
            db.execute("DELETE FROM signoff_resumes WHERE key = ? AND owner = ? AND state = 'resuming'",
                       (key, self.owner))

    def get(self, key: str) -> Claim | None:
        with self._tx() as db:
            row = db.execute("SELECT key, thread_id, interrupt_ids, state, owner FROM signoff_resumes WHERE key = ?",
                             (key,)).fetchone()
        return _claim(row) if row else None

    def stale(self) -> list[Claim]:
        """`resuming` claims whose owner is gone: a resumer died while applying them."""
        with self._tx() as db:
            rows = db.execute("SELECT key, thread_id, interrupt_ids, state, owner FROM signoff_resumes "
                              "WHERE state = 'resuming'").fetchall()
        return [_claim(r) for r in rows if r[4] != self.owner and not _alive(r[4])]


def _claim(row: Sequence[Any]) -> Claim:
    return Claim(row[0], row[1], tuple(json.loads(row[2])), row[3], row[4])
