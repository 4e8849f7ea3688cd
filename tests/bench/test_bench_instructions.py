"""`python -m bench.instructions`: its flow approves through the real app on the suite's engine, its
count is read from cachegrind's summary, and without valgrind it says what is missing. (Counting
under valgrind takes minutes, so the suite runs the flow natively; no figure is asserted.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from bench.instructions import parse_refs
from storage.schema import decisions
from storage.sql import SqlStore
from storage.stores import open_store

ROOT = Path(__file__).resolve().parents[2]


async def test_the_flow_approves_each_request_and_updates_its_card(db_url: str) -> None:
    done = subprocess.run([sys.executable, "-m", "bench.instructions", "--flow", "3", "--db-url", db_url],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "3 approvals"
    store = await open_store(db_url)
    try:
        async with store.engine.connect() as conn:
            outcomes = (await conn.execute(sa.select(decisions.c.outcome))).scalars().all()
    finally:
        await store.close()
    assert outcomes == ["approved"] * 3


async def test_the_hook_flow_is_allowed_by_policy_and_the_bare_flow_answers(db_url: str, tmp_path: Path) -> None:
    for flow_of, url in (("hook", db_url), ("bare", str(tmp_path / "bare.db"))):
        done = subprocess.run([sys.executable, "-m", "bench.instructions", "--flow", "3", "--db-url", url,
                               "--flow-of", flow_of], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.strip().endswith(f"3 {flow_of} calls"), done.stdout
    store = await open_store(db_url)
    try:
        async with store.engine.connect() as conn:
            decided = (await conn.execute(sa.select(decisions.c.outcome, decisions.c.via))).all()
    finally:
        await store.close()
    assert [tuple(d) for d in decided] == [("approved", "policy")] * 3


def test_the_count_is_cachegrinds_instruction_total() -> None:
    summary = ("==2526== Cachegrind, a high-precision tracing profiler\n==2526== \n"
               "==2526== I   refs:      5,060,818,072\n")
    assert parse_refs(summary) == 5_060_818_072
    with pytest.raises(RuntimeError, match="no instruction count"):
        parse_refs("==1== valgrind: failed to start tool 'cachegrind'\n")


def test_without_valgrind_it_says_what_to_install(tmp_path: Path) -> None:
    nothing = tmp_path / "bin"  # a PATH with no valgrind on it
    nothing.mkdir()
    done = subprocess.run([sys.executable, "-m", "bench.instructions"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PATH": str(nothing)})
    assert done.returncode == 2
    assert "needs valgrind" in done.stderr and "apt-get install valgrind" in done.stderr
