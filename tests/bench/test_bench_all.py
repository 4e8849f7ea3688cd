"""`python -m bench.all --quick` runs end to end on SQLite and prints every figure of the performance
issue beside its target. No time is asserted: only that each figure was measured and printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.all import FIGURES

ROOT = Path(__file__).resolve().parents[2]


def test_quick_run_prints_every_figure(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "bench.all", "--quick", "--db", "sqlite"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    table = done.stdout.split("sqlite (load average", 1)[1]
    for name in FIGURES:
        line = next((row for row in table.splitlines() if row.strip().startswith(name)), None)
        assert line is not None, f"{name!r} missing from:\n{done.stdout}"
        assert "not measured" not in line, line
    assert "returned early" in table and ", 0 returned early" in table  # the long-polls really waited


def test_only_auto_measures_the_auto_allowed_figure() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.all", "--quick", "--db", "sqlite", "--only", "auto"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    table = done.stdout.split("sqlite (load average", 1)[1]
    [auto] = [row for row in table.splitlines() if row.strip().startswith("auto-allowed/s vs raw tx/s")]
    assert "not measured" not in auto and "ms CPU each" in auto, auto
    assert "not measured" in next(row for row in table.splitlines() if row.strip().startswith("CPU per approval"))
