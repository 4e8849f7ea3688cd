"""`python -m bench.stages` runs on the suite's engine and prints every stage's row (no figure is asserted)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_stages_bench_prints_every_stage() -> None:
    pg = os.environ.get("SIGNOFF_TEST_DATABASE_URL")
    args = ["--db", "postgres", "--pg-url", pg] if pg else ["--db", "sqlite"]
    done = subprocess.run([sys.executable, "-m", "bench.stages", "--n", "20", "--rounds", "1", "--backlog", "10", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {line[2:18].strip(): line for line in done.stdout.splitlines() if line.startswith("  ")}
    for name in ("submit + card", "GET", "submit, no card", "click", "sum"):
        assert re.match(r"  .{16} \d+\.\d\d / \d+\.\d\d / \d+\.\d\d", rows[name]), (name, done.stdout)
    assert re.search(r"backlog: 10 cards waiting in one channel: the server used \d+ % of a core while \d+\.\d cards/s",
                     done.stdout), done.stdout
