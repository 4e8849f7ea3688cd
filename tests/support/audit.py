"""Shared by the audit tests: `signoff audit ...` as a process, and audit rows written straight to the table."""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from storage.schema import audit_events
from storage.sql import SqlStore
from tests.support.app import ROOT

# `signoff ...` run in a process that prints its own peak resident memory when it ends (stderr, last line).
WITH_RSS = ("import resource, sys\nfrom bot.__main__ import main\ncode = main(sys.argv[1:])\n"
            "print(f'peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MiB', file=sys.stderr)\n"
            "sys.exit(code)\n")


async def signoff(db_url: str, *argv: str, timeout: float = 300) -> tuple[int, str, str]:
    """`signoff <argv>` on `db_url` as a process: (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WITH_RSS, *argv, cwd=str(ROOT),
        env={**os.environ, "DATABASE_URL": db_url, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode or 0, out.decode(), err.decode()


def peak_mib(stderr: str) -> int:
    line = [x for x in stderr.splitlines() if x.startswith("peak RSS ")][-1]
    return int(line.split()[2])


async def seed(store: SqlStore, count: int, *, start: datetime | None = None, batch: int = 5000) -> None:
    """`count` audit rows of decided requests, straight into the table (as the approval path leaves them:
    not yet sealed)."""
    at = start or datetime(2026, 11, 1, tzinfo=UTC)
    for first in range(0, count, batch):
        rows: list[dict[str, Any]] = [
            {"request_id": f"apr_seed{n:07d}", "type": "decided", "actor": f"U{n % 7}",
             "data": {"outcome": "approved" if n % 3 else "rejected", "via": "button", "changes": [],
                      "note": "x" * 120}, "at": at + timedelta(seconds=n)}
            for n in range(first, min(count, first + batch))]
        async with store.unit() as unit:
            await unit.conn.execute(audit_events.insert(), rows)
