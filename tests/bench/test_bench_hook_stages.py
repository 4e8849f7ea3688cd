"""`python -m bench.hook_stages` times an allowed HTTP hook call stage by stage: every stage it names is
reached (a renamed function would leave its line at zero, and the figures in the docs would quietly
stop meaning anything), and the SQLite statements are those of one decided write. Times are printed,
never asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_stage_of_an_allowed_hook_call_is_reached() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.hook_stages", "--n", "30", "--warm", "10"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.strip().split("  ", 1) for line in done.stdout.splitlines()[1:]]
    spent = {label.strip(): float(ms) for ms, label in rows}
    stages = [label for label in spent if not label.startswith("SQLite")]
    assert len(stages) == 15 and all(spent[label] > 0 for label in stages), done.stdout
    assert {label for label in spent if label.startswith("SQLite")} >= {
        "SQLite: commit", "SQLite: BEGIN IMMEDIATE", "SQLite: INSERT INTO requests", "SQLite: INSERT INTO decisions",
        "SQLite: INSERT INTO audit_events"}, done.stdout
