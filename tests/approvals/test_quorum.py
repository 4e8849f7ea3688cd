"""Quorum over real HTTP with signed clicks: N distinct approvers, one vote each, one rejection rejects."""

from __future__ import annotations

import asyncio

from tests.support.outbox import drain, snapshot, vote_rows
from tests.approvals.duty_steps import card_text, ephemerals_to, has_buttons
from bot.sandbox.signed import plain_input
from tests.support.app import App


async def test_quorum_two_one_person_twice_does_not_approve_two_people_do(app: App) -> None:
    req = await app.submit(quorum=2, approvers=["U1", "U2", "U3"])
    assert req["quorum"] == 2 and req["votes"] == []
    card = await app.card(req["id"])
    assert "Needs 2 approvals" in await card_text(app, req["id"])

    await app.click(req["id"], "U1", user_name="alice")
    await app.slack.wait_for("chat.postEphemeral", count=1)
    await drain(app)
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}")
    assert body["status"] == "pending" and [v["id"] for v in body["votes"]] == ["U1"]
    assert "Your approval counts: 1 of 2: <@U1>" in ephemerals_to(app, "U1")[-1]
    # The card shows the progress and keeps its buttons (Edit is gone: a quorum approves one set of params).
    shown = await card_text(app, req["id"])
    assert "1 of 2: <@U1>" in shown and has_buttons(app, card.channel, card.ts)
    assert "signoff_edit" not in shown and "signoff_approve" in shown

    # The same person again: told so, nothing written.
    before = await snapshot(app, req["id"])
    await app.click(req["id"], "U1", user_name="alice")
    await app.slack.wait_for("chat.postEphemeral", count=2)
    await drain(app)
    assert "You already approved this request" in ephemerals_to(app, "U1")[-1]
    assert await snapshot(app, req["id"]) == before

    await app.click(req["id"], "U2", user_name="bob")
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert body["status"] == "approved"
    decision = body["decision"]
    assert decision["decided_by"]["id"] == "U2" and decision["via"] == "button"
    assert [(v["id"], v["name"]) for v in decision["votes"]] == [("U1", "alice"), ("U2", "bob")]
    assert await vote_rows(app, req["id"]) == ["U1", "U2"]
    await drain(app)
    final = await card_text(app, req["id"])
    assert "Approved" in final and "<@U1>" in final and "<@U2>" in final
    assert not has_buttons(app, card.channel, card.ts)


async def test_twenty_concurrent_votes_on_quorum_three_count_exactly_three(app: App) -> None:
    users = [f"U{200 + i}" for i in range(20)]
    for uid in users:
        app.slack.add_user(uid, f"user{uid}")
    req = await app.submit(quorum=3, approvers=users)
    card = await app.card(req["id"])
    await drain(app)

    responses = await asyncio.gather(*[
        app.slack_client.block_action(user=u, user_name=f"user{u}", action_id="signoff_approve", value=req["id"],
                                      block_id="decide", channel=card.channel, message_ts=card.ts)
        for u in users
    ])
    assert all(r.status == 200 for r in responses)
    # Everyone hears something: 2 "your approval counts", 17 "already approved"; the third voter decided.
    ephemerals = await app.slack.wait_for("chat.postEphemeral", count=19)
    await drain(app)
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}")
    assert body["status"] == "approved"
    voters = [v["id"] for v in body["decision"]["votes"]]
    assert len(voters) == 3 == len(set(voters)) and body["decision"]["decided_by"]["id"] == voters[-1]
    assert sorted(voters) == await vote_rows(app, req["id"])
    texts = [c.args["text"] for c in ephemerals]
    assert len(ephemerals) == 19
    assert sum("Your approval counts" in t for t in texts) == 2
    assert sum("Already approved" in t for t in texts) == 17
    audit = [e.type for e in await app.signoff.store.audit_events(req["id"])]  # type: ignore[union-attr]
    assert audit.count("voted") == 2 and audit.count("decided") == 1


async def test_a_rejection_from_anyone_rejects_a_quorum_request(app: App) -> None:
    req = await app.submit(quorum=2, approvers=["U1", "U2", "U3"])
    await app.click(req["id"], "U1", user_name="alice")
    await app.slack.wait_for("chat.postEphemeral", count=1)
    await app.click(req["id"], "U3", action="signoff_reject", user_name="carol")
    [opened] = await app.slack.wait_for("views.open")
    await app.slack_client.view_submission(
        user="U3", user_name="carol", callback_id="signoff_reject",
        private_metadata=opened.args["view"]["private_metadata"], values={"reason": {"value": plain_input("No")}},
    )
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert body["status"] == "rejected" and body["decision"]["decided_by"]["id"] == "U3"
    assert body["decision"]["comment"] == "No"
    # A late approval after the rejection is told the outcome and not counted.
    await app.click(req["id"], "U2", user_name="bob")
    await app.slack.wait_for("chat.postEphemeral", count=2)
    assert "Already rejected by <@U3>" in ephemerals_to(app, "U2")[-1]
    assert await vote_rows(app, req["id"]) == ["U1"]


async def test_quorum_larger_than_the_people_who_can_approve_is_a_400(app: App) -> None:
    status, body = await app.api("POST", "/api/v1/approvals", json=_body(quorum=3, approvers=["U1", "U2"]))
    assert status == 400 and body["error"]["details"][0]["field"] == "quorum"
    # The requester may not approve, so they do not count towards the quorum.
    status, body = await app.api("POST", "/api/v1/approvals",
                                 json=_body(quorum=2, approvers=["U1", "U2"], requested_by="U1"))
    assert status == 400 and "requester may not approve" in body["error"]["message"]
    status, body = await app.api("POST", "/api/v1/approvals", json=_body(quorum=0))
    assert status == 400 and body["error"]["details"][0]["field"] == "quorum"
    _, listed = await app.api("GET", "/api/v1/approvals")
    assert listed["items"] == []


def _body(**overrides: object) -> dict[str, object]:
    from tests.support.app import approval_body

    return approval_body(**overrides)


def test_cast_counts_each_person_once_and_completes_at_the_quorum() -> None:
    from datetime import UTC, datetime

    from bot.domain.model import Actor, Vote
    from bot.domain.votes import Tally, cast

    at = datetime(2026, 11, 30, tzinfo=UTC)
    one = (Vote(Actor("U1"), at),)
    assert cast((), 1, "U1") is Tally.COMPLETES
    assert cast((), 2, "U1") is Tally.COUNTED
    assert cast(one, 2, "U1") is Tally.DUPLICATE
    assert cast(one, 2, "U2") is Tally.COMPLETES
    assert cast(one, 3, "U2") is Tally.COUNTED
