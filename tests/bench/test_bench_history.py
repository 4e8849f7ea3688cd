"""`python -m bench.history` run small on the suite's engine: it seeds a history in bulk and prints every hot
path's cost at both sizes with their ratio, and the command (no figure is asserted)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from bench.history import PATHS

ROOT = Path(__file__).resolve().parents[2]


def test_the_history_bench_prints_every_path_at_both_sizes() -> None:
    pg = os.environ.get("SIGNOFF_TEST_DATABASE_URL")
    args = ["--db", "postgres", "--pg-url", pg] if pg else ["--db", "sqlite"]
    done = subprocess.run([sys.executable, "-m", "bench.history", "--rows", "20,300", "--repeat", "1", "--warmup", "0", "--retention", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert re.search(r"300 history requests seeded in \d+\.\d s", out), out
    rows = {line[2:20].strip(): line for line in out.splitlines() if line.startswith("  ")}
    for path in PATHS:
        assert re.fullmatch(r"  .{18}\s+\d+\.\d\d \(\d+\)\s+\d+\.\d\d \(\d+\)\s+\d+\.\d\d", rows[path]), (path, out)
    # Retention then archives the decided history (all of it older than 30 days; 100 of the 300 are pending).
    assert re.search(r"retention, one sweep's share on 300 rows: 200 requests archived and \d+ delivered rows deleted "
                     r"in (3 batches of 100|1 batches of 500)", out), out  # SQLite's batch, PostgreSQL's
    assert out.rstrip().endswith(f"command: python -m bench.history --rows 20,300 --repeat 1 --warmup 0 --retention {' '.join(args)}"), out
