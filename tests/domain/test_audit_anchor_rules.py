"""The anchor rules of the audit chain (bot/domain/audit_chain.py), on rows made here: a chain that still
passes through an anchor checks; one rewritten at or before it, or cut off before it, is named."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.audit_chain import GENESIS, Anchor, ChainCheck, ChainRow, link

T = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)


def chain(outcomes: list[str]) -> list[ChainRow]:
    rows, prev = [], GENESIS
    for n, outcome in enumerate(outcomes, start=1):
        row = ChainRow(id=n, request_id=f"apr_{n}", type="decided", actor="U1", data={"outcome": outcome},
                       at=T + timedelta(seconds=n))
        made = link(prev, row, n)
        rows.append(ChainRow(**{**row.__dict__, "seq": n, "prev_hash": prev, "hash": made}))
        prev = made
    return rows


def check(rows: list[ChainRow], anchor: Anchor) -> str | None:
    found = ChainCheck(anchor)
    for row in rows:
        if found.feed(row) is not None:
            break
    broken = found.finish(rows[-1].seq or 0, rows[-1].hash or GENESIS)
    return None if broken is None else broken.words()


def test_a_chain_through_its_anchor_checks_and_a_rewritten_or_cut_one_does_not() -> None:
    rows = chain(["approved", "approved", "rejected", "approved"])
    anchor = Anchor(2, rows[1].hash or "", T, "k1", "sig")
    assert check(rows, anchor) is None
    assert check(rows[:3], anchor) is None  # the anchor is behind the head: fine
    rewritten = chain(["rejected", "approved", "rejected", "approved"])  # hashed again from row 1 on
    assert check(rewritten, anchor) is not None and "rewritten" in (check(rewritten, anchor) or "")
    assert "truncated: the chain ends at position 1" in (check(rows[:1], anchor) or "")
    assert check(chain(["approved", "approved", "x"]), anchor) is None  # changed after the anchor: not its business


def test_an_anchor_reads_back_what_it_wrote_and_names_what_is_wrong() -> None:
    anchor = Anchor(7, "a" * 64, T, "k1", "c2ln")
    assert Anchor.from_json(anchor.to_json()) == anchor
    for bad, words in (([], "JSON object"), ({**anchor.to_json(), "seq": 0}, "positive integer"),
                       ({**anchor.to_json(), "hash": "abc"}, "SHA-256"), ({**anchor.to_json(), "signature": None},
                                                                           "no signature"),
                       ({**anchor.to_json(), "at": "yesterday"}, "ISO time")):
        with pytest.raises(ValueError, match=words):
            Anchor.from_json(bad)
