"""Similar pending requests together, over signed Slack requests on a clock the test moves: one card for a
group of alike requests in a channel (posted once however often the sweep runs), Approve all / Reject all
deciding each request on its own (per-request outcome, separation of duties, quorum), a refusal writing
nothing, and two people racing ending with one outcome per request. The card follows its requests: each
one decided on its own card, cancelled or timed out, and each alike request arriving, updates it once (on
any replica), its buttons act on what is still pending, and once nothing is it shows the final tally and
no buttons."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from bot.sandbox import SlackEmulator
from tests.approvals.timer_steps import tick
from tests.fakes.clock import FakeClock
from tests.support.app import API_TOKEN, App, approval_body, start_app, submit_body
from tests.support.outbox import settle
from tests.support.waits import until

# Who an agent is comes from its token (requested_by is a label): two more agents, each with its own.
AGENT_B, AGENT_C = "billing-bot", "refund-bot"
TOKENS = {AGENT_B: "tok-billing-bot-1234", AGENT_C: "tok-refund-bot-5678"}


@pytest_asyncio.fixture
async def sapp(db_url: str, slack: SlackEmulator) -> AsyncIterator[tuple[App, FakeClock]]:
    clock = FakeClock()
    slack.add_channel("C9", "elsewhere")
    running = await start_app(db_url, slack, clock=clock, SIGNOFF_SWEEP_SECONDS="3600", SIGNOFF_SIMILAR_MIN="3",
                              SIGNOFF_API_TOKENS=f"{API_TOKEN},{AGENT_B}:{TOKENS[AGENT_B]}:agent,"
                                                 f"{AGENT_C}:{TOKENS[AGENT_C]}:agent")
    try:
        yield running, clock
    finally:
        await running.stop()


async def refund(app: App, n: int, *, amount: int = 40, by: str = "agent-a", channel: str = "C1",
                 agent: str | None = None, **more: Any) -> str:
    more.setdefault("approvers", ["U1", "U2", "U3"])
    body = approval_body(action={"name": "refund", "params": {"order": f"A-{n}", "amount": amount,
                                                              "to": f"c{n}@example.com"}},
                         summary=f"Refund order A-{n}", preview=None, requested_by=by, channel=channel, **more)
    made = await submit_body(app, body, token=TOKENS[agent] if agent else None)
    await app.card(made["id"])
    return str(made["id"])


def similar_cards(app: App) -> list[Any]:
    return [c for c in app.slack.calls_to("chat.postMessage") if "similar refund requests" in c.args["text"]]


async def press(app: App, user: str, action: str, card: Any) -> str:
    [buttons] = [b for b in card.args["blocks"] if b["type"] == "actions"]
    value = next(e["value"] for e in buttons["elements"] if e["action_id"] == f"signoff_similar_{action}")
    before = len(notes_to(app, user))
    response = await app.slack_client.block_action(user=user, action_id=f"signoff_similar_{action}", value=value,
                                                   block_id="similar", channel="C1",
                                                   message_ts=card.response["ts"])
    assert response.status == 200
    for _ in range(1000):  # the note follows the decisions, after the ack
        if len(notes_to(app, user)) > before:
            return notes_to(app, user)[-1]
        await asyncio.sleep(0.01)
    raise AssertionError(f"{user} was told nothing")


def notes_to(app: App, user: str) -> list[str]:
    """What `user` was told: an ephemeral note in the channel, or a DM when they are not in it."""
    return [str(c.args["text"]) for c in app.slack.calls
            if (c.method == "chat.postEphemeral" and c.args.get("user") == user)
            or (c.method == "chat.postMessage" and c.args.get("channel") == user)]


async def status(app: App, request_id: str) -> dict[str, Any]:
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    return dict(body)


async def decided_rows(app: App, request_id: str) -> list[Any]:
    assert app.signoff is not None
    return [e for e in await app.signoff.store.audit_events(request_id) if e.type == "decided"]


async def test_one_card_for_alike_requests_and_approve_all_decides_each_on_its_own(
        sapp: tuple[App, FakeClock]) -> None:
    app, clock = sapp
    ids = [await refund(app, 0), await refund(app, 1, agent=AGENT_B), await refund(app, 2, by="U3"),
           await refund(app, 3, agent=AGENT_C)]
    other_amount = await refund(app, 4, amount=45)  # a number differs: not alike
    elsewhere = await refund(app, 5, channel="C9")  # another channel
    await tick(app, clock, minutes=1)
    await tick(app, clock, minutes=1)  # a second sweep (or replica) posts no second card
    [card] = similar_cards(app)
    assert card.args["channel"] == "C1"
    assert card.args["text"].startswith("4 similar refund requests from 3 agents")
    text = str(card.args["blocks"])
    assert "amount = 40" in text and "order: any text" in text and "to: any address at @example.com" in text
    [buttons] = [b for b in card.args["blocks"] if b["type"] == "actions"]
    assert [e["action_id"] for e in buttons["elements"]] == ["signoff_similar_review", "signoff_similar_approve",
                                                             "signoff_similar_reject"]
    assert {e["value"] for e in buttons["elements"]} == {",".join(ids)}

    # U3 asked for one of them (requested_by is a Slack user): approving all is refused, nothing is written.
    note = await press(app, "U3", "approve", card)
    assert note.startswith("Nothing was approved: you may not approve “Refund order A-2”"), note
    assert "separation of duties" in note
    for request_id in ids:
        assert (await status(app, request_id))["status"] == "pending"
        assert await decided_rows(app, request_id) == []

    # Not an approver: refused the same way.
    assert (await press(app, "UOUT", "approve", card)).startswith("Nothing was approved")
    assert [(await status(app, i))["status"] for i in ids] == ["pending"] * 4

    review = await press(app, "U1", "review", card)
    assert review.startswith("4 still waiting") and "Refund order A-3" in review

    # An approver approves all: each request is approved on its own, by U1, its card updated.
    assert await press(app, "U1", "approve", card) == "Approved 4 of 4."
    for request_id in ids:
        body = await status(app, request_id)
        assert body["status"] == "approved" and body["decision"]["decided_by"]["id"] == "U1"
        assert body["decision"]["via"] == "button"
        assert len(await decided_rows(app, request_id)) == 1
    assert (await status(app, other_amount))["status"] == "pending"
    assert (await status(app, elsewhere))["status"] == "pending"
    assert "decided already" in await press(app, "U2", "reject", card)


async def test_quorum_counts_each_approval_as_a_vote(sapp: tuple[App, FakeClock]) -> None:
    app, clock = sapp
    ids = [await refund(app, n, quorum=2, approvers=["U1", "U2", "U3"]) for n in range(3)]
    await tick(app, clock, minutes=1)
    [card] = similar_cards(app)
    assert "counted on 3" in await press(app, "U1", "approve", card)
    assert [(await status(app, i))["status"] for i in ids] == ["pending"] * 3
    assert await press(app, "U2", "approve", card) == "Approved 3 of 3."
    assert [(await status(app, i))["status"] for i in ids] == ["approved"] * 3


async def test_two_people_racing_end_with_one_outcome_per_request(sapp: tuple[App, FakeClock]) -> None:
    app, clock = sapp
    ids = [await refund(app, n, by=f"agent-{n % 2}") for n in range(6)]
    await tick(app, clock, minutes=1)
    [card] = similar_cards(app)
    first, second = await asyncio.gather(press(app, "U1", "approve", card), press(app, "U2", "reject", card))
    outcomes = {}
    for request_id in ids:
        body = await status(app, request_id)
        assert body["status"] in ("approved", "rejected")
        rows = await decided_rows(app, request_id)
        assert len(rows) == 1, rows  # one decision per request
        outcomes[request_id] = (body["status"], body["decision"]["decided_by"]["id"])
        assert outcomes[request_id] in (("approved", "U1"), ("rejected", "U2"))
    approved = sum(o[0] == "approved" for o in outcomes.values())
    assert first.startswith(f"Approved {approved} of") or first.startswith("All of them"), first
    assert second.startswith(f"Rejected {len(ids) - approved} of") or second.startswith("All of them"), second
    # The card ends with the tally of what each request got, and no buttons.
    tally = ", ".join(f"{n} {word}" for n, word in ((approved, "approved"), (len(ids) - approved, "rejected")) if n)
    final = await until(lambda: shown(app, card).blocks[0]["type"] == "section" and len(shown(app, card).blocks) == 1
                        and shown(app, card), "the final tally")
    assert f"6 similar refund requests from 1 agent: all decided ({tally})" in final.text


def shown(app: App, card: Any) -> Any:
    """The card as Slack shows it now (after its updates)."""
    return app.slack.messages[(card.args["channel"], card.response["ts"])]


def updates_of(app: App, card: Any) -> list[Any]:
    """The card's updates Slack took (a refused call changed nothing)."""
    return [c for c in app.slack.calls_to("chat.update") if c.args.get("ts") == card.response["ts"] and c.ok]


def values(message: Any) -> list[str]:
    return [e["value"] for b in message.blocks if b["type"] == "actions" for e in b["elements"]]


async def card_says(app: App, card: Any, text: str, updates: int) -> Any:
    """Until the card shows `text`, after exactly `updates` updates (one per change: never two for one)."""
    await until(lambda: text in shown(app, card).text, f"the card to say {text!r}")
    await settle(app)
    assert len(updates_of(app, card)) == updates, [u.args["text"] for u in updates_of(app, card)]
    return shown(app, card)


async def test_the_card_follows_its_requests_to_the_final_tally(sapp: tuple[App, FakeClock]) -> None:
    app, clock = sapp
    ids = [await refund(app, 0), await refund(app, 1, agent=AGENT_B), await refund(app, 2),
           await refund(app, 3, timeout={"after": "60m", "outcome": "expire"})]
    await tick(app, clock, minutes=1)
    [card] = similar_cards(app)
    first = shown(app, card)
    assert first.text.startswith("4 similar refund requests from 2 agents, 4 waiting in this channel")

    # One approved on its own card: the digest says so, and its buttons name the three left.
    await app.click(ids[0], "U1")
    now = await card_says(app, card, "3 waiting in this channel; 1 approved", updates=1)
    assert set(values(now)) == {",".join(ids[1:])} and "Approve all 3" in str(now.blocks)
    # One cancelled by its agent (the API): updated again.
    status_code, answer = await app.api("POST", f"/api/v1/approvals/{ids[1]}/cancel", json={"reason": "not needed"},
                                        headers={"Authorization": f"Bearer {TOKENS[AGENT_B]}"})
    assert status_code == 200, answer
    await card_says(app, card, "2 waiting in this channel; 1 approved, 1 cancelled", updates=2)
    # An alike request arrives: it joins this card (no second card) at the next grouping.
    late = await refund(app, 4, agent=AGENT_C)
    await tick(app, clock, minutes=1)
    now = await card_says(app, card, "5 similar refund requests from 3 agents, 3 waiting", updates=3)
    assert set(values(now)) == {",".join([ids[2], ids[3], late])} and len(similar_cards(app)) == 1
    # One times out.
    await tick(app, clock, minutes=60)
    now = await card_says(app, card, "2 waiting in this channel; 1 approved, 1 expired, 1 cancelled", updates=4)
    assert (await status(app, ids[3]))["status"] == "expired"

    # Approve all on the first render's buttons acts on what is still pending of what it showed (one: ids[2]);
    # the card's current buttons then take the rest.
    assert await press(app, "U2", "approve", card) == "Approved 1 of 1."
    assert (await status(app, late))["status"] == "pending"
    await card_says(app, card, "1 waiting in this channel; 2 approved", updates=5)
    before = len(notes_to(app, "U1"))
    [buttons] = [b for b in shown(app, card).blocks if b["type"] == "actions"]
    reject = next(e["value"] for e in buttons["elements"] if e["action_id"] == "signoff_similar_reject")
    await app.slack_client.block_action(user="U1", action_id="signoff_similar_reject", value=reject, block_id="similar",
                                       channel="C1", message_ts=card.response["ts"])
    assert (await until(lambda: notes_to(app, "U1")[before:]))[0] == "Rejected 1 of 1."
    final = await card_says(app, card, "all decided (2 approved, 1 rejected, 1 expired, 1 cancelled)", updates=6)
    assert [b["type"] for b in final.blocks] == ["section"]  # the final tally, no buttons
    # Nothing more changes: further sweeps send nothing; an old button finds nothing left to do.
    await tick(app, clock, minutes=1)
    await tick(app, clock, minutes=1)
    assert len(updates_of(app, card)) == 6
    assert "decided already" in await press(app, "U2", "reject", card)
    for request_id in ids + [late]:
        assert len(await decided_rows(app, request_id)) == 1


async def test_a_decision_another_replica_made_updates_the_card_once(
        sapp: tuple[App, FakeClock], db_url: str, slack: SlackEmulator) -> None:
    app, clock = sapp
    # The other replica starts before the card exists: it does not know which card a request is on.
    other = await start_app(db_url, slack, clock=clock, SIGNOFF_SWEEP_SECONDS="3600", SIGNOFF_SIMILAR_MIN="3",
                            SIGNOFF_API_TOKENS=API_TOKEN)
    try:
        ids = [await refund(app, n) for n in range(3)]
        await tick(app, clock, minutes=1)
        [card] = similar_cards(app)
        await other.click(ids[0], "U1")  # decided there; nothing here heard of it
        _, body = await other.api("GET", f"/api/v1/approvals/{ids[0]}?wait=5")
        assert body["status"] == "approved"
        await settle(other)
        assert updates_of(app, card) == []
        # Both replicas sweep: one update between them, showing the decision.
        await tick(other, clock, seconds=15)
        await tick(app, clock, seconds=15)
        await card_says(app, card, "2 waiting in this channel; 1 approved", updates=1)
        await settle(other)
        assert len(updates_of(app, card)) == 1
    finally:
        await other.stop()


async def test_an_update_a_stopped_process_left_undelivered_is_sent_once_after_restart(
        db_url: str, slack: SlackEmulator) -> None:
    clock = FakeClock()
    env = {"SIGNOFF_SWEEP_SECONDS": "3600", "SIGNOFF_SIMILAR_MIN": "3", "SIGNOFF_API_TOKENS": API_TOKEN}
    first = await start_app(db_url, slack, clock=clock, **env)
    try:
        ids = [await refund(first, n) for n in range(3)]
        await tick(first, clock, minutes=1)
        [card] = similar_cards(first)
        on = card.args["metadata"]["event_payload"]["card_id"]
        slack.fail("chat.update", status=500, times=1000)  # Slack takes no update until the restart
        await first.click(ids[0], "U1")
        assert first.signoff is not None
        store = first.signoff.store
        await until(lambda: _tried_update(store, on), "the card's update tried and left to retry")
    finally:
        await first.stop()
    slack.clear_faults()
    second = await start_app(db_url, slack, clock=clock, **env)
    try:
        await tick(second, clock, minutes=5)  # its retry falls due
        await card_says(second, card, "2 waiting in this channel; 1 approved", updates=1)
        await tick(second, clock, minutes=1)
        assert len(updates_of(second, card)) == 1
    finally:
        await second.stop()


async def _tried_update(store: Any, card_id: str) -> bool:
    return any(i.kind == "slack.similar_update" and i.status == "pending" and i.attempts >= 1
               for i in await store.outbox_items(card_id))
