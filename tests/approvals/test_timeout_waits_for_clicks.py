"""A timeout waits while a person's click on the request is stored and not yet handled (bot/approvals/timers.py,
bot/slack/received.py): the click was acked before the deadline, so it is the person's decision, even
when its process died and the click is replayed after the deadline passed. Deterministic: the clock is
the test's, the click's row is left as a process that acked it and stopped leaves it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from bot.domain.model import Via
from bot.sandbox.signed import Response, SlackClient
from storage.schema import slack_received
from tests.approvals.timer_steps import tick
from tests.fakes.clock import FakeClock
from tests.support.app import SIGNING_SECRET, App
from tests.support.waits import until


class _Kept(SlackClient):
    """Builds and signs a click as Slack sends it, and keeps the body instead of sending it."""

    body = ""
    content_type = ""

    async def post_raw(self, body: str | bytes, *, content_type: str, **_: Any) -> Response:
        self.body, self.content_type = (body.decode() if isinstance(body, bytes) else body), content_type
        return Response(status=200, headers={}, text="")


async def _status(app: App, request_id: str) -> dict[str, Any]:
    status, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert status == 200, body
    return body


async def test_a_timeout_waits_for_a_stored_unhandled_click_and_the_click_decides(tapp: App, clock: FakeClock) -> None:
    app = tapp
    assert app.signoff is not None
    req = await app.submit(reminders=False, escalation=False, timeout="30m")
    bystander = await app.submit(summary="Nobody clicked this one", reminders=False, escalation=False, timeout="30m")
    card = await app.card(req["id"])
    kept = _Kept("http://127.0.0.1:9", SIGNING_SECRET, fake=app.slack)
    await kept.block_action(user="U1", user_name="alice", action_id="signoff_approve", value=req["id"],
                            block_id="decide", channel=card.channel, message_ts=card.ts)
    # Acked at 29 minutes by a process still working on it (its lease renewed): stored, not done.
    clock.advance(minutes=29)
    async with app.signoff.store.unit() as unit:
        row = (await unit.conn.execute(slack_received.insert().values(
            key="block_actions:kept-click", body=kept.body, content_type=kept.content_type, received_at=clock.now(),
            lease_until=clock.now() + timedelta(days=1), attempts=1)
            .returning(slack_received.c.id))).scalar_one()

    await tick(app, clock, minutes=2)  # 31 minutes: both deadlines passed
    assert (await _status(app, bystander["id"]))["status"] == "expired"  # the sweep ran, and timed out the other
    assert (await _status(app, req["id"]))["status"] == "pending"  # this one waits for its click
    await tick(app, clock, minutes=1)
    assert (await _status(app, req["id"]))["status"] == "pending"  # still: the click is not handled yet

    # The click's process is gone for good: its lease runs out and another process replays it.
    async with app.signoff.store.unit() as unit:
        await unit.conn.execute(slack_received.update().where(slack_received.c.id == row)
                                .values(lease_until=clock.now() - timedelta(seconds=1)))
    await app.signoff.inbox.replay_stale()

    async def decided() -> Any:
        return (await _status(app, req["id"])).get("decision")

    decision = await until(decided, "the replayed click decided", timeout=120)
    assert decision["outcome"] == "approved" and decision["via"] == "button" and decision["decided_by"]["id"] == "U1"

    async def marked() -> bool:
        # What the inbox's loop does every lease/3 seconds (10 s by default), or the next stored input.
        await app.signoff.inbox.inputs.flush_done()  # type: ignore[union-attr]
        async with app.signoff.store.engine.connect() as conn:  # type: ignore[union-attr]
            done = (await conn.execute(sa.select(slack_received.c.done_at)
                                       .where(slack_received.c.id == row))).scalar_one()
        return done is not None

    await until(marked, "the click's row marked done", timeout=120)
    await tick(app, clock, minutes=30)  # later sweeps leave the decision alone
    final = await _status(app, req["id"])
    assert final["status"] == "approved" and final["decision"]["via"] == "button"


async def test_a_stored_input_handled_without_a_decision_lets_the_timeout_happen(tapp: App, clock: FakeClock) -> None:
    """A stored input that named the request and is done (a refused click, say) holds nothing back."""
    app = tapp
    assert app.signoff is not None
    req = await app.submit(reminders=False, escalation=False, timeout="30m")
    card = await app.card(req["id"])
    kept = _Kept("http://127.0.0.1:9", SIGNING_SECRET, fake=app.slack)
    await kept.block_action(user="U1", user_name="alice", action_id="signoff_approve", value=req["id"],
                            block_id="decide", channel=card.channel, message_ts=card.ts)
    async with app.signoff.store.unit() as unit:
        await unit.conn.execute(slack_received.insert().values(
            key="block_actions:handled-click", body=kept.body, content_type=kept.content_type,
            received_at=clock.now(), lease_until=clock.now(), done_at=clock.now(), attempts=1))
    await tick(app, clock, minutes=31)
    final = await _status(app, req["id"])
    assert final["status"] == "expired" and final["decision"]["via"] == "timeout"


async def test_a_click_stored_while_the_sweep_is_expiring_the_request_still_wins(tapp: App, clock: FakeClock) -> None:
    """The race the chaos loop found: the sweep found nothing stored for the request, then a click was stored
    and acked, then the sweep wrote the timeout. The check now runs inside the timeout's own decision unit
    (after its time is taken), so the click stored just before it holds the timeout back."""
    app = tapp
    assert app.signoff is not None
    signoff = app.signoff
    req = await app.submit(reminders=False, escalation=False, timeout="30m")
    card = await app.card(req["id"])
    kept = _Kept("http://127.0.0.1:9", SIGNING_SECRET, fake=app.slack)
    await kept.block_action(user="U1", user_name="alice", action_id="signoff_approve", value=req["id"],
                            block_id="decide", channel=card.channel, message_ts=card.ts)
    decide = signoff.service.decide
    stored: list[int] = []

    async def click_lands_first(request_id: str, outcome: Any, **kw: Any) -> Any:
        if kw.get("via") is Via.TIMEOUT and not stored:  # Slack's click is stored (and acked) at this instant
            async with signoff.store.unit() as unit:
                stored.append((await unit.conn.execute(slack_received.insert().values(
                    key="block_actions:racing-click", body=kept.body, content_type=kept.content_type,
                    received_at=clock.now(), lease_until=clock.now() + timedelta(days=1), attempts=1)
                    .returning(slack_received.c.id))).scalar_one())
        return await decide(request_id, outcome, **kw)

    signoff.service.decide = click_lands_first  # type: ignore[method-assign]
    try:
        await tick(app, clock, minutes=31)
    finally:
        signoff.service.decide = decide  # type: ignore[method-assign]
    assert stored, "the sweep never tried to time the request out"
    assert (await _status(app, req["id"]))["status"] == "pending"  # the stored click holds the timeout back
    async with signoff.store.unit() as unit:  # its process died: the lease runs out, another one replays it
        await unit.conn.execute(slack_received.update().where(slack_received.c.id == stored[0])
                                .values(lease_until=clock.now() - timedelta(seconds=1)))
    await signoff.inbox.replay_stale()

    async def decided() -> Any:
        return (await _status(app, req["id"])).get("decision")

    decision = await until(decided, "the replayed click decided", timeout=120)
    assert decision["outcome"] == "approved" and decision["via"] == "button"
