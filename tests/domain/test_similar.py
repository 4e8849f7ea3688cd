"""Which pending requests are alike (bot.domain.similar), table-driven: the same tool, channel and parameter
names, values differing only where a grant's match could allow; never critical, confirmed or batch requests."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.domain.model import Action, Item, Kind, Request, Risk, Status
from bot.domain.similar import MAX_GROUP, Card, Digest, card_id, groups, plan, state_of

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


def open_card(members: list[Request], **more: Any) -> Card:
    [group] = groups(members, 2)
    return Card(card_id(group), group.channel, group.tool, group.shape, group.ids,
                state_of((r.id, "pending") for r in members), **more)


PLANS = [
    # (name, card's requests, pending requests now, expected joins, expected new group sizes)
    ("an alike arrival joins the open card", 3, [req(n) for n in range(4)], [1], []),
    ("not alike: it does not join", 3, [req(n) for n in range(3)] + [req(3, amount=41)], [], []),
    ("a closed card takes nobody: a new group forms", 3,
     [req(n) for n in range(3, 6)], "closed", [3]),
    ("a full card takes what fits; the rest form their own group", MAX_GROUP - 2,
     [req(n) for n in range(MAX_GROUP + 3)], [2], [3]),
]


@pytest.mark.parametrize(("name", "on_card", "pending", "joins", "new"), PLANS, ids=[p[0] for p in PLANS])
def test_plan(name: str, on_card: int, pending: list[Request], joins: Any, new: list[int]) -> None:
    card = open_card([req(n) for n in range(on_card)], closed=joins == "closed")
    planned = plan(pending, [card], 3)
    assert [len(ids) for ids in planned.joins.values()] == ([] if joins == "closed" else joins)
    assert [g.total for g in planned.new] == new
    joined = planned.joins.get(card.id, ())
    assert not set(joined) & set(card.members)  # a request is on one card at most
    assert all(not set(g.ids) & set(joined) for g in planned.new)


def test_the_digest_names_what_it_shows_and_ends_with_a_tally() -> None:
    members = [req(0), req(1, by="agent-b"), req(2), req(3)]
    card = open_card(members)
    digest = Digest(card, tuple(members))
    assert digest.state == card.state and digest.tally() == "" and digest.title() == (
        "4 similar refund requests from 2 agents")
    decided = Digest(card, (replace(members[0], status=Status.APPROVED), members[1],
                            replace(members[2], status=Status.EXPIRED), replace(members[3], status=Status.APPROVED)))
    assert decided.state != card.state and [r.id for r in decided.pending] == [members[1].id]
    assert decided.tally() == "2 approved, 1 expired"
    # A state is what the card shows: the same statuses in any order name the same state.
    assert state_of([(r.id, r.status.value) for r in reversed(decided.requests)]) == decided.state
