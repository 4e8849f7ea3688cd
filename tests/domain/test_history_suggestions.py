"""Suggestions from the decision record (bot.domain.history), table-driven over generated histories."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.history import Decided, Thresholds, suggest
from bot.domain.model import Outcome, Via
from bot.domain.values import Risk

NOW = datetime(2026, 12, 6, 12, tzinfo=UTC)


def history(approved: int, rejected: int = 0, *, people: int = 4, edited: int = 0, tool: str = "send_email",
            to: str = "c{n}@example.com", via: Via = Via.BUTTON, risk: Risk = Risk.HIGH,
            age_days: float = 1) -> list[Decided]:
    rows = []
    for n in range(approved + rejected):
        rows.append(Decided(tool, {"to": to.format(n=n), "subject": f"s{n}"},
                            Outcome.APPROVED if n < approved else Outcome.REJECTED, via, f"U{n % people}",
                            NOW - timedelta(days=age_days, minutes=n), risk, edited=n < edited))
    return rows


CASES = [
    # (name, history, expected [(effect, scope)])
    ("enough approvals by enough people", history(23, edited=1), [("allow", "send_email to *@example.com")]),
    ("one approval short", history(19), []),
    ("too few people", history(30, people=2), []),
    ("one rejection spoils an allow", history(25, 1), []),
    ("too many edits", history(25, edited=2), []),
    ("policy's and grants' decisions do not count", history(30, via=Via.POLICY) + history(30, via=Via.GRANT), []),
    ("timeouts do not count", history(30, via=Via.TIMEOUT), []),
    ("older than the window", history(30, age_days=15), []),
    ("critical is never suggested", history(40, risk=Risk.CRITICAL), []),
    ("a critical request in the group stops it", history(30) + history(1, risk=Risk.CRITICAL), []),
    ("mostly rejected: deny", history(1, 6, tool="db_exec", to="prod-{n}"), [("deny", "db_exec")]),
    ("rejected but not mostly", history(3, 5, tool="db_exec", to="prod-{n}"), []),
    ("too few rejections", history(0, 4, tool="db_exec", to="prod-{n}"), []),
]


@pytest.mark.parametrize(("name", "rows", "expected"), CASES, ids=[c[0] for c in CASES])
def test_thresholds(name: str, rows: list[Decided], expected: list[tuple[str, str]]) -> None:
    assert [(s.effect, s.scope) for s in suggest(rows, NOW)] == expected


def test_domains_are_suggested_apart_and_the_text_and_rule_say_exactly_what() -> None:
    rows = history(23, edited=1) + history(25, to="x{n}@other.org", people=3)
    found = {s.scope: s for s in suggest(rows, NOW)}
    ours = found["send_email to *@example.com"]
    assert ours.text() == ("send_email to *@example.com: approved 23 times by 4 people in 14 days, never rejected, "
                           "edited once: allow it?")
    assert ours.rule() == {"name": "allow-send-email-example-com", "tool": "send_email",
                           "params": {"to": {"glob": "*@example.com"}}, "effect": "allow"}
    assert "send_email to *@other.org" in found


def test_thresholds_come_from_settings() -> None:
    rows = history(5, people=2)
    assert suggest(rows, NOW) == []
    assert [s.effect for s in suggest(rows, NOW, Thresholds(min_approvals=5, min_people=2))] == ["allow"]
