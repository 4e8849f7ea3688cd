"""A card's post and a decision's card update render the request their own commit wrote, without
reading it back (bot/live/just_committed.py), and a card still ends on the request's latest state."""

from __future__ import annotations

import json

from bot.outbox import effects
from bot.live.just_committed import Fresh
from bot.slack.blocks import approval_card
from bot.domain.outbox import OutboxItem
from tests.support.outbox import drain
from tests.support.app import App


async def test_a_card_and_its_decision_are_rendered_from_what_was_committed(app: App) -> None:
    assert app.signoff is not None
    fresh = app.signoff.service.fresh
    before = fresh.taken
    req = await app.submit()
    card = await app.card(req["id"])
    click = await app.click(req["id"], "U1")
    assert click.status == 200
    await app.slack.wait_for("chat.update", count=1)  # the click is acked first; its decision follows
    await drain(app)
    assert fresh.taken - before == 2  # the post and the decision's update: neither read the request back
    assert len(fresh) == 0
    # What Slack shows is what a read of the stored request renders.
    stored = await app.signoff.store.get_request(req["id"])
    assert stored is not None and stored.status.value == "approved"
    final = app.slack.messages[(card.channel, card.ts)]
    expected = approval_card(stored, now=app.signoff.service.clock.now())
    assert final.blocks == expected["blocks"] and final.text == expected["text"]


async def test_a_decision_before_the_card_went_out_still_ends_on_the_decided_card(app: App) -> None:
    """The post renders the pending request its submit committed; the cancel committed before the post
    was delivered enqueued its own update, which comes after the post and shows the cancel."""
    assert app.signoff is not None
    dispatcher = app.signoff.dispatcher
    await dispatcher.stop()
    req = await app.submit()
    status, body = await app.api("POST", f"/api/v1/approvals/{req['id']}/cancel", json={"reason": "changed my mind"})
    assert status == 200 and body["status"] == "cancelled"
    taken = app.signoff.service.fresh.taken
    await dispatcher.start()
    await drain(app)
    # The post took what its submit committed; the update read, since that request had no card ts yet.
    assert app.signoff.service.fresh.taken - taken == 1
    posts = [c for c in app.slack.calls_to("chat.postMessage", ok_only=True) if req["id"] in json.dumps(c.args)]
    assert len(posts) == 1 and any(b["type"] == "actions" for b in posts[0].args["blocks"])  # posted as pending
    card = await app.card(req["id"])
    assert not any(b["type"] == "actions" for b in card.blocks)  # then updated to the cancel
    assert "cancel" in json.dumps(card.blocks).lower()


async def test_fresh_gives_a_request_only_to_the_first_attempt_of_its_own_item(app: App) -> None:
    assert app.signoff is not None
    req = await app.submit()
    stored = await app.signoff.store.get_request(req["id"])
    assert stored is not None
    key = f"post:{stored.id}"

    def item(attempts: int, dedupe_key: str = key, request_id: str = stored.id) -> OutboxItem:
        return OutboxItem(effects.POST_CARD, dedupe_key, {"request_id": request_id}, request_id, id=7,
                          attempts=attempts)

    fresh = Fresh(cap=2)
    fresh.put(key, stored)
    assert fresh.take(item(2)) is None and len(fresh) == 0  # a retry reads (and the entry is gone)
    fresh.put(key, stored)
    assert fresh.take(item(1, dedupe_key="post:other")) is None and len(fresh) == 1  # another item's
    assert fresh.take(item(1, request_id="apr_other")) is None and len(fresh) == 0  # another request's
    fresh.put(key, stored)
    assert fresh.take(item(1)) is stored and fresh.taken == 1
    assert fresh.take(item(1)) is None  # once
    for n in range(3):
        fresh.put(f"post:{n}", stored)
    assert len(fresh) == 2 and fresh.take(item(1, dedupe_key="post:0")) is None  # the oldest went first
