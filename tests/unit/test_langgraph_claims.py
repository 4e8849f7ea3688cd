"""Resume claims in SQLite: one holder at a time, finished means never again, a dead holder's claim is free."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from signoff.errors import SignoffError
from signoff.langgraph_claims import Claims
from signoff.langgraph_resume import load_factory


def test_one_holder_and_done_is_final(tmp_path: Path) -> None:
    path = str(tmp_path / "claims.db")
    first, second = Claims(path), Claims(path)  # two resumers (alive: this very process)
    assert first.claim("k", "t", ["i1"]) is True
    assert second.claim("k", "t", ["i1"]) is False
    assert second.stale() == []
    first.finish("k")
    assert first.claim("k", "t", ["i1"]) is False and second.claim("k", "t", ["i1"]) is False
    assert Claims(path).get("k").state == "done"  # type: ignore[union-attr]


def test_a_claim_whose_process_is_gone_is_stale_and_taken_over(tmp_path: Path) -> None:
    path = str(tmp_path / "claims.db")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_owner = f"{socket.gethostname()}|{gone.stdout.strip()}||abc"
    with sqlite3.connect(path) as db:
        Claims(path)  # creates the table
        db.execute("INSERT INTO signoff_resumes VALUES ('k', 't', '[\"i1\"]', 'resuming', ?, 0, NULL)", (dead_owner,))
    other_host = "elsewhere|1||x"
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO signoff_resumes VALUES ('k2', 't2', '[]', 'resuming', ?, 0, NULL)", (other_host,))
    claims = Claims(path)
    assert [c.key for c in claims.stale()] == ["k"]  # another host's claim is never taken over
    assert claims.claim("k", "t", ["i1"]) is True and claims.claim("k2", "t2", []) is False
    claims.release("k")
    assert claims.get("k") is None


def test_graph_spec_errors_are_one_clear_line() -> None:
    with pytest.raises(SignoffError, match="module:function"):
        load_factory("nocolon")
    with pytest.raises(SignoffError, match="cannot import no_such_module"):
        load_factory("no_such_module:build")
