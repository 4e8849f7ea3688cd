"""An Approve click on a request this process submitted and posted is checked on the request as the
process last committed it (bot/live/pending_states.py), with no read, and decided on that version only. A request
another process wrote since is checked again on the row as read: a clicker that write took away is
refused, one it kept still decides, once."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.domain.model import Action, Actor, Kind, Outcome, Request, Risk, Status, Via
from bot.live.pending_states import Known
from bot.approvals.service import Service
from storage.base import CardPosted, Unit
from tests.support.outbox import drain, snapshot
from tests.support.app import App


async def held_and_stored(app: App, request_id: str) -> tuple[Request | None, Request | None]:
    assert app.signoff is not None
    return app.signoff.service.known.get(request_id), await app.signoff.store.get_request(request_id)


async def another_process_writes(app: App, request_id: str, **changes: object) -> None:
    """A write this process does not know of (another replica's): a Service of its own on the same store."""
    assert app.signoff is not None
    other = Service(app.signoff.store)

    async def change(unit: Unit, request: Request) -> None:
        await Service.write(unit, request.evolve(**changes), request)

    assert (await other.guarded(request_id, change)).ran


async def test_the_held_request_is_the_stored_one_and_a_click_on_it_needs_no_read(app: App) -> None:
    assert app.signoff is not None
    known = app.signoff.service.known
    req = await app.submit(approvers=["U1", "U2"])
    await app.card(req["id"])
    await drain(app)
    held, stored = await held_and_stored(app, req["id"])
    assert held is not None and held == stored  # the submit's state plus the card's ts, version and all
    used = known.used
    resp = await app.click(req["id"], "U1", user_name="alice")
    assert resp.status == 200
    await app.slack.wait_for("chat.update", count=1)
    await drain(app)
    assert known.used == used + 1  # checked on what it held
    decided = await app.signoff.store.get_request(req["id"])
    assert decided is not None and decided.status is Status.APPROVED and decided.version == held.version + 1
    assert decided.decision is not None and decided.decision.decided_by is not None
    assert decided.decision.decided_by.id == "U1"
    assert known.get(req["id"]) is None  # decided: no longer held
    assert app.slack.calls_to("chat.postEphemeral") == []


async def test_a_clicker_another_process_took_away_is_refused_and_nothing_is_written(app: App) -> None:
    """The held request still names U1 an approver; the row, written since by another replica, does
    not. The decision on the held version writes nothing, the click is checked on the row, refused."""
    assert app.signoff is not None
    known = app.signoff.service.known
    req = await app.submit(approvers=["U1"])
    await app.card(req["id"])
    await drain(app)
    await another_process_writes(app, req["id"], approvers=("U9",))
    held, stored = await held_and_stored(app, req["id"])
    assert held is not None and stored is not None and held.approvers == ("U1",) and stored.version == held.version + 1
    before = await snapshot(app, req["id"])
    used = known.used
    resp = await app.click(req["id"], "U1", user_name="alice")
    assert resp.status == 200
    [note] = await app.slack.wait_for("chat.postEphemeral")
    assert note.args["user"] == "U1" and "not one of the approvers" in note.args["text"]
    await drain(app)
    assert await snapshot(app, req["id"]) == before  # still pending, nothing written
    assert known.used == used and known.get(req["id"]) is None  # the out-of-date state was dropped


async def test_a_clicker_another_process_kept_decides_once_on_the_row(app: App) -> None:
    assert app.signoff is not None
    req = await app.submit(approvers=["U1", "U2"])
    await app.card(req["id"])
    await drain(app)
    await another_process_writes(app, req["id"], approvers=("U2", "U1"))
    _, moved = await held_and_stored(app, req["id"])
    assert moved is not None
    resp = await app.click(req["id"], "U1", user_name="alice")
    assert resp.status == 200
    await app.slack.wait_for("chat.update", count=1)
    await drain(app)
    decided = await app.signoff.store.get_request(req["id"])
    assert decided is not None and decided.status is Status.APPROVED and decided.version == moved.version + 1
    assert decided.approvers == ("U2", "U1")  # decided on the row as it is, not on the held state
    events = [e.type for e in await app.signoff.store.audit_events(req["id"])]
    assert events.count("decided") == 1
    assert app.slack.calls_to("chat.postEphemeral") == []


NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def request(n: int, text: str | None = None, **changes: object) -> Request:
    """A pending request `apr_{n}`; `text`: its one parameter, for a size."""
    return Request(id=f"apr_{n}", kind=Kind.APPROVAL, status=Status.PENDING,
                   action=Action("deploy", {} if text is None else {"x": text}), summary="deploy", risk=Risk.HIGH,
                   channel="C1", created_at=NOW, updated_at=NOW).evolve(**changes)


def test_known_takes_a_card_only_over_a_held_request_without_one_and_keeps_at_most_cap() -> None:
    known = Known(cap=2)
    known.card_stored(CardPosted("apr_0", "C1", "1.000001"), NOW)  # nothing held: nothing made up
    assert known.get("apr_0") is None
    known.put(request(0))
    known.card_stored(CardPosted("apr_0", "C1", "1.000001"), NOW)
    assert known.get("apr_0") == request(0, card_channel="C1", card_ts="1.000001", version=2)
    known.card_stored(CardPosted("apr_0", "C2", "2.000002"), NOW)  # a ts is stored once
    assert known.get("apr_0") == request(0, card_channel="C1", card_ts="1.000001", version=2)
    known.put(request(1))
    known.put(request(2))
    assert len(known) == 2 and known.get("apr_0") is None  # the oldest went first
    known.forget("apr_1")
    assert known.get("apr_1") is None and len(known) == 1


def test_known_holds_at_most_its_budget_and_never_a_request_too_big_for_it() -> None:
    """An agent may send up to 1 MB a request: what is held is bounded in bytes too, not only in count."""
    known = Known(cap=100, budget=16_000)
    for n in range(3):
        known.put(request(n, "x" * 900))  # about 900 characters each
    assert len(known) == 3
    known.put(request(9, "y" * 1_100))  # over a sixteenth of the budget: not held
    assert known.get("apr_9") is None and len(known) == 3
    schema = {"type": "object", "description": "z" * 1_100}  # the schema is the agent's too
    known.put(request(8, "").evolve(action=Action("deploy", {}, schema)))
    assert known.get("apr_8") is None and len(known) == 3
    for n in range(3, 30):
        known.put(request(n, "x" * 900))
    assert len(known) < 20 and known.get("apr_29") is not None and known.get("apr_0") is None
    known.put(request(29, "x" * 900))  # put again: counted once
    before = len(known)
    for n in range(3, 30):
        known.forget(f"apr_{n}")
    assert len(known) == 0 and before > 0
    for n in range(16):  # with nothing held, the whole budget is free again
        known.put(request(100 + n, "x" * 900))
    assert len(known) == 16


async def test_a_decision_on_a_read_that_moved_on_writes_nothing_and_hands_back_the_row(app: App) -> None:
    """`Service.decide(only_on_read=True)`, which every Approve click uses: nothing is written on a
    state that is no longer the row's, and the row as the decision read it comes back to be checked."""
    assert app.signoff is not None
    service = app.signoff.service
    req = await app.submit(approvers=["U1"])
    await app.card(req["id"])
    await drain(app)
    read = await app.signoff.store.get_request(req["id"])
    assert read is not None
    await another_process_writes(app, req["id"], approvers=("U9",))
    before = await snapshot(app, req["id"])
    result = await service.decide(req["id"], Outcome.APPROVED, via=Via.BUTTON, actor=Actor("U1", "alice"),
                                  read=read, only_on_read=True)
    assert result.stale and not result.won
    assert result.request.version == read.version + 1 and result.request.approvers == ("U9",)
    assert await snapshot(app, req["id"]) == before


async def test_a_click_before_the_cards_ts_is_stored_decides_once_and_the_card_is_updated_after_its_post(
        app: App) -> None:
    """A person clicks as soon as Slack shows the card, which can be before Slack's answer to the post
    (with the card's ts) reached Signoff: the click is checked on the request without a ts, decided
    once, and the card's update waits for the post's result, then updates that card, once."""
    assert app.signoff is not None
    app.slack.hang("chat.postMessage", apply=True)  # the card is in the channel; Slack's answer waits
    req = await app.submit(approvers=["U1"])
    await app.slack.wait_for("chat.postMessage", ok_only=False)
    [card] = [m for m in app.slack.channel_messages("C1")
              if ((m.metadata or {}).get("event_payload") or {}).get("request_id") == req["id"]]
    stored = await app.signoff.store.get_request(req["id"])
    assert stored is not None and stored.card_ts is None
    resp = await app.slack_client.block_action(user="U1", user_name="alice", action_id="signoff_approve",
                                               value=req["id"], block_id="decide", channel="C1", message_ts=card.ts)
    assert resp.status == 200
    _, decided = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert decided["status"] == "approved" and decided["decision"]["decided_by"]["id"] == "U1"
    assert app.slack.calls_to("chat.update") == []  # the update waits for the post's result
    app.slack.release_hung()
    [update] = await app.slack.wait_for("chat.update")
    await drain(app)
    assert update.args["ts"] == card.ts and card.update_count == 1
    after = await app.signoff.store.get_request(req["id"])
    assert after is not None and (after.card_channel, after.card_ts) == ("C1", card.ts)
    events = [e.type for e in await app.signoff.store.audit_events(req["id"])]
    assert events.count("decided") == 1 and events.count("posted") == 1
    assert len(app.slack.calls_to("chat.postMessage", ok_only=False)) == 1
    assert app.slack.calls_to("chat.postEphemeral") == []
