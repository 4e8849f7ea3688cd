"""Retention (SIGNOFF_RETENTION_DAYS): decided requests older than N days leave the hot tables.

Runs after each timer sweep (bot/process/app.py) in every process; one replica at a time does the work:
the job's row in `job_claims` is claimed by a guarded update (storage/retention.py), held for `LEASE`,
and given back due in `EVERY` once nothing old is left, or at once (the next sweep) while some is.
The work is bounded batches (`BATCH` requests on SQLite, `PG_BATCH` on PostgreSQL), each its own short
transaction, at most `PER_SWEEP` requests per sweep, so it never holds a lock for long and never makes a sweep slow; a backlog (the first run on a
year of history) drains over successive sweeps.

What a decided request leaves behind: a line in `requests_archive` (id, tool, outcome, when), so a GET of
its id answers 410 and its audit rows still name their tool. The audit log itself is kept whole: its
rows are never touched, and `signoff audit verify` still proves the chain. Pending requests, and any
request with a timer still due, are never touched.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.process.clock import Clock
from storage.retention import RetentionStore
from storage.sql import SqlStore

log = logging.getLogger(__name__)

JOB = "retention"
# Requests per batch (one transaction). SQLite's batch holds the file's one write lock, which every click's
# decision waits behind: 100 there (about 5 ms of CPU: bench.history --retention measured 49 µs per archived
# request), 500 on PostgreSQL, whose batch locks only its own rows (as the timer sweep's batches: timers.py).
BATCH = 100
PG_BATCH = 500
PER_SWEEP = 10_000  # requests at most per sweep, then the next sweep goes on
LEASE = timedelta(minutes=10)  # a replica killed mid-run holds the job no longer than this
EVERY = timedelta(hours=1)


@dataclass
class RetentionReport:
    archived: int = 0
    forgotten: int = 0  # delivered outbox items and handled Slack inputs deleted
    claimed: bool = False
    more: bool = False  # stopped at PER_SWEEP with old rows left: the next sweep goes on


class Retention:
    def __init__(self, store: SqlStore, clock: Clock, days: int) -> None:
        self.rows = RetentionStore(store)
        self.batch = PG_BATCH if store.dialect == "postgresql" else BATCH
        self.clock = clock
        self.keep = timedelta(days=days)
        self.owner = f"{socket.gethostname()}:{os.getpid()}"

    async def tick(self) -> RetentionReport:
        """One sweep's share of retention, if this process wins the job's claim."""
        report = RetentionReport()
        now = self.clock.now()
        if not await self.rows.claim(JOB, now, now + LEASE, self.owner):
            return report  # another replica has it, or it is not due
        report.claimed = True
        try:
            await self._run(now - self.keep, report)
        finally:
            await self.rows.release(JOB, self.owner, self.clock.now() + (timedelta(0) if report.more else EVERY))
        if report.archived or report.forgotten:
            log.info("retention archived %d decided requests and deleted %d delivered rows older than %s%s",
                     report.archived, report.forgotten, cutoff_words(now - self.keep),
                     "; more next sweep" if report.more else "")
        return report

    async def _run(self, cutoff: datetime, report: RetentionReport) -> None:
        for _ in range(PER_SWEEP // self.batch):
            done = await self.rows.archive_batch(cutoff, self.clock.now(), limit=self.batch)
            report.archived += done
            if done < self.batch:
                break
        else:
            report.more = True
            return
        for _ in range(PER_SWEEP // self.batch):
            gone = await self.rows.forget_delivered(cutoff, limit=self.batch)
            report.forgotten += gone
            if gone < self.batch:
                return
        report.more = True



@dataclass(frozen=True)
class Archived:
    """What is left of a request retention archived: its outcome, the token that made it, when."""

    request_id: str
    status: str
    owner: str | None
    at: datetime

    def words(self) -> str:
        return (f"request {self.request_id!r} ({self.status}) was archived on {cutoff_words(self.at)} by retention "
                "(SIGNOFF_RETENTION_DAYS); its audit rows are kept (GET /api/v1/audit)")


class Archive:
    """Reads of the archive (whatever SIGNOFF_RETENTION_DAYS says now: rows archived earlier stay)."""

    def __init__(self, store: SqlStore) -> None:
        self.rows = RetentionStore(store)

    async def find(self, request_id: str) -> Archived | None:
        found = await self.rows.archived(request_id)
        return None if found is None else Archived(request_id, *found)


def cutoff_words(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC")
