"""`python -m bench.soak`, run for nine seconds on the suite's engine, prints its per-minute rows and the
final counts (no figure is asserted)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_soak_bench_samples_and_counts() -> None:
    pg = os.environ.get("SIGNOFF_TEST_DATABASE_URL")
    args = ["--db", "postgres", "--pg-url", pg] if pg else ["--db", "sqlite"]
    done = subprocess.run([sys.executable, "-m", "bench.soak", "--minutes", "0.15", "--sample-seconds", "3",
                           "--restart-every", "0.06", "--rate", "2", "--timeout", "3s", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if re.match(r"\s+\d+\.\d \|", line)]
    assert len(rows) >= 3, done.stdout
    assert re.search(r"^\s+0\.0 \|\s+\d+\.\d\s+\d+\s+\d+\s+\d+ \|", rows[0]), rows[0]  # RSS, fds, tasks, db
    assert re.search(r"\d+ restarts of B", done.stdout), done.stdout
    assert re.search(r"from the database: \d+ decided once, \d+ decided more than once, \d+ never decided",
                     done.stdout), done.stdout
