"""Storage contract for quorum votes, the issue-12 request fields and batch items (every backend)."""

from __future__ import annotations

from datetime import timedelta

from bot.domain.model import Action, Actor, Change, Decision, Item, Outcome, Preview, Vote, Via
from bot.domain.params_hash import params_sha256
from storage.base import Store
from tests.storage.test_contract import T0, make_request


async def test_one_vote_per_person_per_request(store: Store) -> None:
    request = make_request(quorum=3)
    other = make_request(quorum=2)
    async with store.unit() as unit:
        await unit.insert_request(request)
        await unit.insert_request(other)
    async with store.unit() as unit:
        assert await unit.insert_vote(request.id, Vote(Actor("U1", "alice"), T0))
        assert not await unit.insert_vote(request.id, Vote(Actor("U1", "alice"), T0 + timedelta(seconds=1)))
        assert await unit.insert_vote(request.id, Vote(Actor("U2"), T0))
        assert await unit.insert_vote(other.id, Vote(Actor("U1"), T0))  # another request: its own vote
    async with store.unit() as unit:  # in a later unit too: the key is in the database
        assert not await unit.insert_vote(request.id, Vote(Actor("U2"), T0))


async def test_issue_12_request_and_decision_fields_round_trip(store: Store) -> None:
    items = (
        Item(Action("send_email", {"to": "a@example.com"}, {"type": "object"}),
             Preview("email", {"to": ["a@example.com"], "cc": [], "subject": "s", "body": "b"}), key="toolu_1"),
        Item(Action("send_email", {"to": "b@example.com"}), key="toolu_2"),
    )
    request = make_request(quorum=2, requester_may_approve=False, confirm="DELETE", requester_user="U9",
                           votes=(Vote(Actor("U1", "alice"), T0),), items=items)
    async with store.unit() as unit:
        await unit.insert_request(request)
    stored = await store.get_request(request.id)
    assert stored is not None
    assert (stored.quorum, stored.requester_may_approve, stored.confirm, stored.requester_user) == (
        2, False, "DELETE", "U9")
    assert stored.votes == request.votes and stored.items == items

    decided_items = (items[0].evolve(outcome=Outcome.APPROVED, params={"to": "c@example.com"},
                                     changes=(Change("to", "a@example.com", "c@example.com"),),
                                     decided_by=Actor("U2", "bob")),
                     items[1].evolve(outcome=Outcome.REJECTED, decided_by=Actor("U2", "bob")))
    votes = (*request.votes, Vote(Actor("U2", "bob"), T0 + timedelta(minutes=1)))
    decision = Decision(Outcome.APPROVED, {}, (), None, Actor("U2", "bob"), T0, Via.BUTTON, votes=votes,
                        params_sha256=params_sha256({}), items=decided_items)
    async with store.unit() as unit:
        assert await unit.update_request(stored.evolve(votes=votes, items=decided_items), expected_version=1)
        await unit.insert_decision(request.id, decision)
    final = await store.get_request(request.id)
    assert final is not None and final.decision == decision and final.items == decided_items
    assert final.decision.to_json()["items"][0]["params_sha256"] == params_sha256({"to": "c@example.com"})
