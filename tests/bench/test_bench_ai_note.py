"""`python -m bench.ai_note` prints the tokens of a note and an answer (no figure is asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_ai_note_bench_prints_each_case() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.ai_note"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    for case in ("note, e-mail card", "note, 5 KB e-mail body", "answer, run's 6 steps"):
        assert re.search(rf"  {re.escape(case)}\s+\d+\s+\d+\s+\d+$", done.stdout, re.M), done.stdout
