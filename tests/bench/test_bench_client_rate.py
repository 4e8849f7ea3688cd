"""`python -m bench.client_rate` runs end to end and prints each case's rate. No rate or time is asserted:
only that each case was measured and how each wait ended."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_run_prints_every_case() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.client_rate", "--seconds", "4"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^(pending|undeliverable|restart: \w+) +[\d.]+/min.*$",
                                                         done.stdout, re.M)}
    assert set(rows) == {"pending", "undeliverable", "restart: down", "restart: back", "restart: all"}, done.stdout
    assert "UndeliverableError (channel_not_found)" in rows["undeliverable"]
    # One long-poll, then the wait ended; plus the one fetch of the server's signing keys (pinned for
    # the process) when it falls inside the measured window.
    assert re.search(r"\((1|2) in ", rows["undeliverable"]), rows["undeliverable"]
