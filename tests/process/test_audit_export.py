"""`signoff audit export` (issue 37): 40,000 audit rows streamed as JSON lines in bounded memory (the
export's peak RSS is printed, and compared with an export of 2,000 rows: it does not grow with the log);
CSV with a header; --since and --outcome filter."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from pathlib import Path

from bot.approvals.audit import AuditLog
from storage.sql import SqlStore
from tests.support.audit import peak_mib, seed, signoff

SMALL, LARGE = 2_000, 40_000
GROWTH_MIB = 20  # 40,000 rows held as dicts take 30 MiB, with their JSON lines 50 MiB (measured); streaming grows ~5


async def test_forty_thousand_rows_export_in_bounded_memory(store: SqlStore, db_url: str,
                                                                 tmp_path: Path) -> None:
    await seed(store, SMALL)
    out = tmp_path / "small.jsonl"
    code, _, err = await signoff(db_url, "audit", "export", "--format", "jsonl", "--output", str(out))
    assert code == 0, err
    small_peak = peak_mib(err)
    assert sum(1 for _ in out.open()) == SMALL

    await seed(store, LARGE - SMALL, start=datetime(2026, 11, 2, tzinfo=UTC))
    out = tmp_path / "large.jsonl"
    code, _, err = await signoff(db_url, "audit", "export", "--format", "jsonl", "--output", str(out))
    assert code == 0, err
    large_peak = peak_mib(err)
    print(f"\naudit export peak RSS: {small_peak} MiB for {SMALL:,} rows, {large_peak} MiB for {LARGE:,} rows "
          f"({out.stat().st_size // (1 << 20)} MiB written)")
    assert f"exported {LARGE} audit rows" in err
    with out.open() as lines:
        first = json.loads(next(lines))
        count, last = 1, first
        for line in lines:
            count, last = count + 1, json.loads(line)
    assert count == LARGE and first["seq"] == 1 and last["seq"] == LARGE and len(last["hash"]) == 64
    assert large_peak - small_peak < GROWTH_MIB, (small_peak, large_peak)
    assert (await AuditLog(store).verify(seal=False)).ok  # the export sealed them all, in one line


async def test_csv_with_since_and_outcome(store: SqlStore, db_url: str, tmp_path: Path) -> None:
    await seed(store, 30)  # one a second from 2026-11-01T00:00:00Z; every third is rejected
    out = tmp_path / "audit.csv"
    code, _, err = await signoff(db_url, "audit", "export", "--format", "csv", "--since", "2026-11-01T00:00:15Z",
                                 "--outcome", "rejected", "--output", str(out))
    assert code == 0, err
    rows = list(csv.DictReader(out.open()))
    assert [r["request_id"] for r in rows] == [f"apr_seed{n:07d}" for n in (15, 18, 21, 24, 27)]
    assert rows[0]["outcome"] == "rejected" and json.loads(rows[0]["data"])["via"] == "button"
    assert list(rows[0]) == ["id", "seq", "at", "request_id", "tool", "type", "actor", "outcome", "data",
                             "prev_hash", "hash"]
    code, _, err = await signoff(db_url, "audit", "export", "--since", "last tuesday")
    assert code == 2 and "neither an ISO time" in err
