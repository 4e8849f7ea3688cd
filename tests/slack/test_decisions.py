"""Clicks and modals through signed HTTP requests to the running app; Slack is the fake Web API."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from bot.sandbox.signed import checkboxes, number_input, plain_input, static_select
from tests.support.outbox import drain, snapshot
from tests.support.app import App


async def test_fifty_approvers_click_at_once_one_decision(app: App) -> None:
    users = [f"U{100 + i}" for i in range(50)]
    for uid in users:
        app.slack.add_user(uid, f"user{uid}")
    req = await app.submit(approvers=users)
    card = await app.card(req["id"])
    await drain(app)
    updates_before = len(app.slack.calls_to("chat.update", ok_only=True))

    responses = await asyncio.gather(*[
        app.slack_client.block_action(user=u, user_name=f"user{u}", action_id="signoff_approve", value=req["id"],
                                      block_id="decide", channel=card.channel, message_ts=card.ts)
        for u in users
    ])
    assert all(r.status == 200 for r in responses)

    ephemerals = await app.slack.wait_for("chat.postEphemeral", count=49)
    await drain(app)
    status, body = await app.api("GET", f"/api/v1/approvals/{req['id']}")
    winner = body["decision"]["decided_by"]["id"]
    assert body["status"] == "approved" and winner in users
    assert len(ephemerals) == 49
    assert {c.args["user"] for c in ephemerals} == set(users) - {winner}
    assert all(f"Already approved by <@{winner}>" in c.args["text"] for c in ephemerals)
    assert len(app.slack.calls_to("chat.update", ok_only=True)) - updates_before == 1
    audit = await app.signoff.store.audit_events(req["id"])  # type: ignore[union-attr]
    assert [e.type for e in audit].count("decided") == 1
    # The card now shows the outcome and has no buttons.
    final = app.slack.messages[(card.channel, card.ts)]
    assert not any(b["type"] == "actions" for b in final.blocks)
    assert winner in json.dumps(final.blocks)


async def test_approve_racing_cancel_exactly_one_outcome(app: App) -> None:
    for _ in range(5):
        req = await app.submit()
        card = await app.card(req["id"])
        click, (status, cancel_body) = await asyncio.gather(
            app.slack_client.block_action(user="U1", user_name="alice", action_id="signoff_approve",
                                          value=req["id"], block_id="decide", channel=card.channel,
                                          message_ts=card.ts),
            app.api("POST", f"/api/v1/approvals/{req['id']}/cancel", json={"reason": "agent gave up"}),
        )
        assert click.status == 200
        await drain(app)
        _, final = await app.api("GET", f"/api/v1/approvals/{req['id']}")
        audit = await app.signoff.store.audit_events(req["id"])  # type: ignore[union-attr]
        assert [e.type for e in audit].count("decided") == 1
        if final["status"] == "cancelled":
            assert status == 200
            # The clicker is told; nothing else was written for the click.
            ephemeral = await app.slack.wait_for("chat.postEphemeral", count=1 + _cancel_losses(app))
            assert "Already cancelled" in ephemeral[-1].args["text"]
        else:
            assert final["status"] == "approved"
            assert status == 409 and cancel_body["error"]["code"] == "not_pending"
            assert cancel_body["request"]["decision"]["decided_by"]["id"] == "U1"


def _cancel_losses(app: App) -> int:
    return len([c for c in app.slack.calls_to("chat.postEphemeral") if "Already cancelled" in c.args["text"]]) - 1


async def test_bad_signature_and_stale_timestamp_are_refused_and_write_nothing(app: App) -> None:
    req = await app.submit()
    card = await app.card(req["id"])
    await drain(app)
    before = await snapshot(app, req["id"])
    payload = {"type": "block_actions", "user": {"id": "U1"}, "actions": [
        {"action_id": "signoff_approve", "value": req["id"], "block_id": "decide", "type": "button"}],
        "container": {"type": "message", "message_ts": card.ts, "channel_id": card.channel}}
    from urllib.parse import quote

    raw = "payload=" + quote(json.dumps(payload))
    bad = await app.slack_client.post_raw(raw, content_type="application/x-www-form-urlencoded",
                                          signature="v0=" + "0" * 64)
    assert bad.status == 401 and "invalid request" in bad.text
    stale_ts = int(time.time()) - 301
    stale = await app.slack_client.post_raw(raw, content_type="application/x-www-form-urlencoded",
                                            timestamp=stale_ts)
    assert stale.status == 401
    unsigned = await app.slack_client.post_raw(raw, content_type="application/x-www-form-urlencoded",
                                               headers={"X-Slack-Signature": ""})
    assert unsigned.status == 401
    await drain(app)
    assert await snapshot(app, req["id"]) == before
    assert app.slack.calls_to("chat.postEphemeral") == []


async def test_non_approver_is_told_and_nothing_is_written(app: App) -> None:
    req = await app.submit(approvers=["U1"])
    await app.card(req["id"])
    await drain(app)
    before = await snapshot(app, req["id"])
    resp = await app.click(req["id"], "UOUT", user_name="mallory")
    assert resp.status == 200
    [note] = await app.slack.wait_for("chat.postEphemeral")
    assert note.args["user"] == "UOUT" and "not one of the approvers" in note.args["text"]
    assert "<@U1>" in note.args["text"]
    await drain(app)
    assert await snapshot(app, req["id"]) == before


async def test_usergroup_members_may_decide(app: App) -> None:
    app.slack.add_usergroup("SOPS", ["U3"])
    req = await app.submit(approvers=["SOPS"])
    await app.click(req["id"], "U3", user_name="carol")
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert body["status"] == "approved" and body["decision"]["decided_by"]["id"] == "U3"
    assert app.slack.calls_to("usergroups.users.list", ok_only=True)[0].args["usergroup"] == "SOPS"


async def test_unknown_request_and_forged_values_are_refused(app: App) -> None:
    req = await app.submit()
    other = await app.submit(summary="Another request")
    card = await app.card(req["id"])
    await app.card(other["id"])
    await drain(app)
    before = (await snapshot(app, req["id"]), await snapshot(app, other["id"]))
    send = app.slack_client.block_action
    common = {"user": "U1", "action_id": "signoff_approve", "block_id": "decide", "channel": card.channel,
              "message_ts": card.ts}
    r1 = await send(value="apr_00000000000000000000000000", **common)  # well-formed, unknown
    r2 = await send(value="'; DROP TABLE requests; --", **common)  # not one of our ids
    r3 = await send(value=other["id"], **common)  # a real id, but not this card's
    r4 = await send(value=None, **common)
    assert {r.status for r in (r1, r2, r3, r4)} == {200}
    notes = await app.slack.wait_for("chat.postEphemeral", count=4)
    texts = sorted(n.args["text"] for n in notes)
    assert any("does not exist" in t for t in texts)
    assert sum("does not carry a Signoff request id" in t for t in texts) == 2
    assert any("does not belong to the card" in t for t in texts)
    await drain(app)
    assert (await snapshot(app, req["id"]), await snapshot(app, other["id"])) == before


async def test_malformed_payloads_get_a_clear_answer(app: App) -> None:
    r1 = await app.slack_client.post_raw("payload=%7Bnot json", content_type="application/x-www-form-urlencoded")
    r2 = await app.slack_client.post_raw("{not json", content_type="application/json")
    assert (r1.status, r2.status) == (400, 400)
    assert "malformed Slack payload" in r1.json()["error"] and "malformed Slack payload" in r2.json()["error"]


async def test_reject_opens_modal_and_records_reason(app: App) -> None:
    req = await app.submit()
    await app.click(req["id"], "U2", action="signoff_reject", user_name="bob")
    [opened] = await app.slack.wait_for("views.open")
    view = opened.args["view"]
    assert view["callback_id"] == "signoff_reject"
    resp = await app.slack_client.view_submission(
        user="U2", user_name="bob", callback_id="signoff_reject", private_metadata=view["private_metadata"],
        values={"reason": {"value": plain_input("Wrong customer")}},
    )
    assert resp.status == 200 and resp.text in ("", "{}")
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert body["status"] == "rejected"
    from bot.domain.params_hash import params_sha256

    assert body["decision"] | {"decided_at": None} == {
        "outcome": "rejected", "params": req["action"]["params"], "changes": [], "comment": "Wrong customer",
        "decided_by": {"id": "U2", "name": "bob"}, "decided_at": None, "via": "modal",
        "params_sha256": params_sha256(req["action"]["params"]), "votes": [], "items": None,
    }


EDIT_SCHEMA = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "format": "email"},
        "subject": {"type": "string", "maxLength": 120},
        "amount": {"type": "integer", "minimum": 1, "maximum": 100},
        "priority": {"enum": ["low", "normal", "urgent"]},
        "notify": {"type": "boolean"},
    },
    "required": ["to", "subject", "amount"],
}
EDIT_PARAMS = {"to": "a@example.com", "subject": "Refund", "amount": 40, "priority": "normal", "notify": False}


def edit_values(**changes: Any) -> dict[str, Any]:
    values = {
        "p:to": {"value": plain_input(EDIT_PARAMS["to"])},
        "p:subject": {"value": plain_input(EDIT_PARAMS["subject"])},
        "p:amount": {"value": number_input(str(EDIT_PARAMS["amount"]))},
        "p:priority": {"value": static_select(json.dumps(EDIT_PARAMS["priority"]))},
        "p:notify": {"value": checkboxes([])},
    }
    for key, value in changes.items():
        values[f"p:{key}"] = {"value": value}
    return values


async def open_edit(app: App, request_id: str, user: str = "U1") -> dict[str, Any]:
    await app.click(request_id, user, action="signoff_edit", user_name="alice")
    [opened] = await app.slack.wait_for("views.open")
    return opened.args["view"]


async def test_edit_modal_approves_with_changes(app: App) -> None:
    req = await app.submit(action={"name": "refund", "params": EDIT_PARAMS, "params_schema": EDIT_SCHEMA})
    view = await open_edit(app, req["id"])
    assert view["callback_id"] == "signoff_edit"
    block_ids = [b.get("block_id") for b in view["blocks"] if b["type"] == "input"]
    assert block_ids == ["p:to", "p:subject", "p:amount", "p:priority", "p:notify"]
    resp = await app.slack_client.view_submission(
        user="U1", user_name="alice", callback_id="signoff_edit", private_metadata=view["private_metadata"],
        values=edit_values(subject=plain_input("Your refund of $45"), amount=number_input("45"),
                           notify=checkboxes(["true"])),
    )
    assert resp.status == 200, resp.text
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    decision = body["decision"]
    assert body["status"] == "approved" and decision["via"] == "modal"
    assert decision["params"] == {**EDIT_PARAMS, "subject": "Your refund of $45", "amount": 45, "notify": True}
    assert decision["changes"] == [
        {"field": "subject", "from": "Refund", "to": "Your refund of $45"},
        {"field": "amount", "from": 40, "to": 45},
        {"field": "notify", "from": False, "to": True},
    ]
    # The proposal is kept apart from the decision.
    assert body["action"]["params"] == EDIT_PARAMS


async def test_invalid_edit_gets_inline_errors_and_writes_nothing(app: App) -> None:
    req = await app.submit(action={"name": "refund", "params": EDIT_PARAMS, "params_schema": EDIT_SCHEMA})
    view = await open_edit(app, req["id"])
    await drain(app)
    before = await snapshot(app, req["id"])
    resp = await app.slack_client.view_submission(
        user="U1", callback_id="signoff_edit", private_metadata=view["private_metadata"],
        values=edit_values(amount=number_input("500"), subject=plain_input("x" * 121)),
    )
    assert resp.status == 200
    answer = resp.json()
    assert answer["response_action"] == "errors"
    assert set(answer["errors"]) == {"p:amount", "p:subject"}
    assert "100" in answer["errors"]["p:amount"]
    await drain(app)
    assert await snapshot(app, req["id"]) == before


async def test_submission_after_decision_is_refused_inline(app: App) -> None:
    req = await app.submit(action={"name": "refund", "params": EDIT_PARAMS, "params_schema": EDIT_SCHEMA})
    view = await open_edit(app, req["id"])
    await app.click(req["id"], "U2", user_name="bob")
    await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    resp = await app.slack_client.view_submission(
        user="U1", callback_id="signoff_edit", private_metadata=view["private_metadata"], values=edit_values(),
    )
    answer = resp.json()
    assert answer["response_action"] == "errors"
    assert "Already approved by @U2" in next(iter(answer["errors"].values()))


async def test_forged_modal_metadata_is_refused(app: App) -> None:
    resp = await app.slack_client.view_submission(
        user="U1", callback_id="signoff_reject", private_metadata="{not json",
        values={"reason": {"value": plain_input("x")}},
    )
    assert resp.json()["response_action"] == "errors"
    # Well-formed metadata of one request's form, with another request's id swapped in: refused too.
    opened_on, other = await app.submit(), await app.submit(summary="Another request")
    await app.card(opened_on["id"])
    await app.card(other["id"])
    await drain(app)
    before = await snapshot(app, other["id"])
    await app.click(opened_on["id"], "U1", action="signoff_reject", user_name="alice")
    [opened] = await app.slack.wait_for("views.open")
    meta = json.loads(opened.args["view"]["private_metadata"])
    assert meta["request_id"] == opened_on["id"]
    forged = json.dumps({**meta, "request_id": other["id"]})
    resp = await app.slack_client.view_submission(
        user="U1", callback_id="signoff_reject", private_metadata=forged,
        values={"reason": {"value": plain_input("x")}},
    )
    assert resp.json()["response_action"] == "errors", resp.text
    await drain(app)
    assert await snapshot(app, other["id"]) == before
    _, body = await app.api("GET", f"/api/v1/approvals/{other['id']}")
    assert body["status"] == "pending"


async def test_non_approver_modal_submission_is_refused_after_ack(app: App) -> None:
    req = await app.submit(approvers=["U1"])
    await app.card(req["id"])
    await drain(app)
    before = await snapshot(app, req["id"])
    meta = json.dumps({"request_id": req["id"], "version": 2, "channel": "C1"})
    resp = await app.slack_client.view_submission(
        user="UOUT", callback_id="signoff_reject", private_metadata=meta,
        values={"reason": {"value": plain_input("I say no")}},
    )
    assert resp.status == 200 and resp.text in ("", "{}")
    [note] = await app.slack.wait_for("chat.postEphemeral")
    assert note.args["user"] == "UOUT" and "not one of the approvers" in note.args["text"]
    await drain(app)
    assert await snapshot(app, req["id"]) == before


async def test_oversize_modal_text_is_refused_inline(app: App) -> None:
    req = await app.submit()
    await app.card(req["id"])
    await drain(app)
    before = await snapshot(app, req["id"])
    meta = json.dumps({"request_id": req["id"], "version": 2, "channel": "C1"})
    resp = await app.slack_client.view_submission(
        user="U1", callback_id="signoff_reject", private_metadata=meta,
        values={"reason": {"value": plain_input("no " * 5000)}},
    )
    answer = resp.json()
    assert answer["response_action"] == "errors"
    assert answer["errors"]["reason"] == "must be at most 2000 characters (this is 15000)"
    await drain(app)
    assert await snapshot(app, req["id"]) == before


async def test_modal_and_command_answers_come_from_the_listeners_ack(app: App) -> None:
    # Modal submissions and slash commands are answered with what the listener acks (here: inline
    # errors, a help text), while the listener's work goes on after the answer.
    req = await app.submit(action={"name": "refund", "params": EDIT_PARAMS, "params_schema": EDIT_SCHEMA})
    view = await open_edit(app, req["id"])
    await drain(app)
    before = await snapshot(app, req["id"])
    bad = await app.slack_client.view_submission(
        user="U1", user_name="alice", callback_id="signoff_edit", private_metadata=view["private_metadata"],
        values=edit_values(amount=number_input("1000")))
    assert bad.status == 200 and bad.json()["response_action"] == "errors"
    assert await snapshot(app, req["id"]) == before
    helped = await app.slack_client.command(user="U1", text="help")
    assert helped.status == 200 and "/signoff" in helped.json()["text"]
    # A modal no listener knows: Bolt's answer for an unhandled request, and nothing is written.
    unknown = await app.slack_client.view_submission(user="U1", callback_id="not_ours", values={})
    assert unknown.status == 404
    assert await snapshot(app, req["id"]) == before


async def test_a_listener_failing_after_its_ack_still_answers_with_the_ack(app: App) -> None:
    # Bolt replaces the ack with a 500 when a listener raises after acking; Slack must get the ack.
    # (A listener added to the running app: nothing of Signoff's is replaced.)
    assert app.signoff is not None

    @app.signoff.clicks.view("test_fails_after_ack")
    async def fails_after_ack(ack: Any) -> None:
        await ack(response_action="errors", errors={"reason": "Say why."})
        raise RuntimeError("after the ack")

    resp = await app.slack_client.view_submission(user="U1", callback_id="test_fails_after_ack", values={})
    assert resp.status == 200
    assert resp.json() == {"response_action": "errors", "errors": {"reason": "Say why."}}
