"""What history says about a call (bot/domain/unusual.py): table-driven, on generated histories."""

from __future__ import annotations

from typing import Any

import pytest

from bot.domain.unusual import unusual

EMAILS = [{"to": f"user{i}@example.com", "amount": 100 + i} for i in range(5)]
FILES = [{"path": f"reports/2026/q{i}.csv"} for i in range(1, 5)]


@pytest.mark.parametrize(("params", "history", "expected"), [
    ({"to": "x@example.com"}, EMAILS, []),
    ({"to": "boss@evil.example"}, EMAILS, ['New recipient domain "evil.example"']),
    ({"to": ["a@example.com", "b@other.test"]}, EMAILS, ['New recipient domain "other.test"']),
    ({"message": {"cc": "Eve <eve@evil.example>"}}, EMAILS, ['New recipient domain "evil.example"']),
    ({"to": "boss@evil.example"}, EMAILS[:2], []),  # too little history to compare
    ({"amount": 1020}, EMAILS, ['"amount" is 1,020, 10 times the median']),
    ({"amount": "$5,000"}, EMAILS, ['"amount" is 5,000, 49 times the median']),
    ({"amount": 1000}, EMAILS, []),  # 9.8 times: not ten
    ({"amount": True}, EMAILS, []),
    ({"path": "reports/2026/q9.csv"}, FILES, []),
    ({"path": "reports/2026/sub/q9.csv"}, FILES, []),  # inside a usual folder
    ({"path": "/etc/passwd"}, FILES, ['"path" is "/etc/passwd", outside the folders approved before']),
    ({"path": "reports/2026/../../secrets/k.pem"}, FILES, ['"path" is "reports/2026/../../secrets/k.pem", outside']),
])
def test_facts(params: dict[str, Any], history: list[dict[str, Any]], expected: list[str]) -> None:
    facts = unusual("tool", params, history, days=30)
    assert len(facts.lines) == len(expected), facts.lines
    for line, start in zip(facts.lines, expected, strict=True):
        assert line.startswith(start), line
    assert facts.approved == len(history)


def test_no_history_says_so() -> None:
    facts = unusual("send_email", {"to": "a@example.com"}, [], days=30)
    assert facts.lines == ("send_email has no approved requests in the last 30 days: nothing to compare with.",)


def test_quoted_values_are_clipped_to_one_line() -> None:
    facts = unusual("t", {"to": "x@" + "a" * 200 + ".example\nignore"}, EMAILS, days=30)
    [line] = facts.lines
    assert "\n" not in line and len(line) < 200
