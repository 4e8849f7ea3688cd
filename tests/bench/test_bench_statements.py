"""`python -m bench.statements` prints every statement a pending submit sends to the database, and how
many: one statement on PostgreSQL (its own transaction, the stamps verified in it); BEGIN IMMEDIATE, the delegation stamp, four inserts and
COMMIT on SQLite. A statement count is not a time: a new statement on the submit path fails this test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_pending_submit_sends_the_fewest_statements() -> None:
    pg = os.environ.get("SIGNOFF_TEST_DATABASE_URL")
    args = ["--db", "postgres", "--pg-url", pg] if pg else ["--db", "sqlite"]
    done = subprocess.run([sys.executable, "-m", "bench.statements", "--submits", "2", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    shown = [line.strip() for line in lines if line.startswith("  ")]
    if pg:
        # The per-token pending cap (SIGNOFF_MAX_PENDING_PER_TOKEN) reads its count first, on the
        # partial index ix_requests_owner_pending; everything written is still one statement.
        assert [s.split(" ")[0] for s in shown] == ["SELECT", "WITH"], shown
        assert shown[0].startswith("SELECT count(*) FROM requests WHERE owner = $1 AND status = 'pending'"), shown
        assert lines[-1].endswith("statements per pending submit: [2, 2]"), done.stdout
    else:
        assert [" ".join(s.split(" ")[:3]) for s in shown] == [
            "BEGIN IMMEDIATE", "SELECT count(*) AS", "INSERT INTO requests", "INSERT INTO audit_events",
            "INSERT INTO outbox", "INSERT INTO request_people", "COMMIT"], shown
        assert lines[-1].endswith("statements per pending submit: [7, 7]"), done.stdout
