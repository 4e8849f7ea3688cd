"""Which pending requests are alike (bot.domain.similar), table-driven: the same tool, channel and parameter
names, values differing only where a grant's match could allow; never critical, confirmed or batch requests."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.domain.model import Action, Item, Kind, Request, Risk, Status
from bot.domain.similar import MAX_GROUP, groups

T0 = datetime(2030, 1, 7, 9, tzinfo=UTC)


def req(n: int, *, to: str = "c{n}@example.com", amount: Any = 40, tool: str = "refund", channel: str = "C1",
        by: str = "agent-a", **more: Any) -> Request:
    more = {"risk": Risk.HIGH, "card_ts": f"{n}.1", "status": Status.PENDING, **more}
    return Request(id=f"apr_{n:026d}", kind=Kind.APPROVAL,
                   action=Action(tool, {"to": to.format(n=n), "amount": amount, "order": f"A-{n}"}),
                   summary=f"Refund {n}", channel=channel, created_at=T0 + timedelta(minutes=n),
                   updated_at=T0, requested_by=by, **more)


BATCH = Item(Action("refund", {}))
CASES = [
    # (name, requests, min size, expected group sizes)
    ("three alike: one group", [req(n) for n in range(3)], 3, [3]),
    ("two are not enough for three", [req(n) for n in range(2)], 3, []),
    ("another amount is not alike", [req(0), req(1), req(2, amount=41)], 3, []),
    ("another domain is not alike", [req(0), req(1), req(2, to="x@other.org")], 3, []),
    ("another channel is not alike", [req(0), req(1), req(2, channel="C9")], 3, []),
    ("another tool is not alike", [req(0), req(1), req(2, tool="refund_all")], 3, []),
    ("critical is never grouped", [req(0), req(1), req(2, risk=Risk.CRITICAL)], 3, []),
    ("a typed confirmation is never grouped", [req(0), req(1), req(2, confirm="refund")], 3, []),
    ("no card yet: not offered", [req(0), req(1), req(2, card_ts=None)], 3, []),
    ("decided: not pending", [req(0), req(1), req(2, status=Status.APPROVED)], 3, []),
    ("a batch is never grouped", [req(0), req(1), req(2, items=(BATCH,))], 3, []),
    ("two groups, largest first", [req(n) for n in range(3)] + [req(10 + n, to="d{n}@b.org") for n in range(4)], 3,
     [4, 3]),
]


@pytest.mark.parametrize(("name", "requests", "min_size", "sizes"), CASES, ids=[c[0] for c in CASES])
def test_alike(name: str, requests: list[Request], min_size: int, sizes: list[int]) -> None:
    assert [g.total for g in groups(requests, min_size)] == sizes


def test_a_group_says_how_they_differ_and_lists_the_oldest_first_at_most_max() -> None:
    many = [req(n, by=f"agent-{n % 3}") for n in reversed(range(MAX_GROUP + 5))]
    [group] = groups(many, 5)
    assert group.total == MAX_GROUP + 5 and len(group.ids) == MAX_GROUP and group.ids[0] == req(0).id
    assert group.title() == f"{MAX_GROUP + 5} similar refund requests from 3 agents"
    assert group.where() == "amount = 40, order: any text, to: any address at @example.com"
    assert len(",".join(group.ids)) <= 2000  # Slack's button value
    assert groups([replace(r, kind=Kind.QUESTION) for r in many[:5]], 3) == []  # questions are answered, not approved
