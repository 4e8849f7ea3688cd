"""Each action of a batch decided on its own, over real HTTP: only the decisions it offers, a reason or a
reply per action, edit-and-approve per action; refusals write nothing; racing people end in one outcome."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.domain.params_hash import params_sha256
from bot.sandbox.signed import plain_input
from signoff import ItemDecision, ParamsChanged, SignoffClient
from signoff.models import Decision
from tests.support.outbox import drain, snapshot
from tests.approvals.batch_steps import approve_selected, click_item, controls, item_state, open_item, submit
from tests.approvals.duty_steps import ephemerals_to
from tests.approvals.test_batch import EMAIL_SCHEMA, valid
from tests.support.app import API_TOKEN, App, approval_body
from tests.support.app import submit_body

PICK, EDIT, REJECT, REPLY = "signoff_item_pick", "signoff_item_edit", "signoff_item_reject", "signoff_item_respond"
# Action 1 offers the usual three; 2 no Edit; 3 approve or reply (and Reject, which every action offers
# whatever the agent says: issue 33); 4 only edit or reject.
ALLOWED = [None, ["approve", "reject"], ["approve", "respond"], ["edit", "reject"]]
OFFERED = [None, ["approve", "reject"], ["approve", "reject", "respond"], ["edit", "reject"]]


def mixed_body(**overrides: Any) -> dict[str, Any]:
    items = []
    for n, allowed in enumerate(ALLOWED):
        item: dict[str, Any] = {"name": "send_email", "params": {"to": f"c{n}@example.com", "subject": f"Refund {n}"},
                                "params_schema": EMAIL_SCHEMA}
        if allowed is not None:
            item["allowed_decisions"] = allowed
        items.append(item)
    body = approval_body(items=items, summary="Send 4 refund emails", **overrides)
    body.pop("action")
    body.pop("preview")
    return body


async def submit_mixed(app: App, **overrides: Any) -> dict[str, Any]:
    return await submit_body(app, mixed_body(**overrides))


async def told(app: App, click: Any) -> str:
    """Send a click and return the ephemeral note it got."""
    count = len(app.slack.calls_to("chat.postEphemeral"))
    await click
    return str((await app.slack.wait_for("chat.postEphemeral", count=count + 1))[-1].args["text"])


async def test_each_action_offers_its_own_decisions_and_records_its_own_outcome(app: App) -> None:
    req = await submit_mixed(app)
    assert [i.get("allowed_decisions") for i in req["items"]] == OFFERED
    card = await app.card(req["id"])
    valid(card.blocks)
    assert [controls(card, n) for n in range(4)] == [
        [PICK, EDIT, REJECT], [PICK, REJECT], [PICK, REJECT, REPLY], [EDIT, REJECT]]  # no Edit where it is not offered

    view = await open_item(app, req["id"], 0, REJECT)
    assert view["callback_id"] == "signoff_item_reject" and view["title"]["text"] == "Reject action 1"
    ok = await submit(app, view, {"reason": {"value": plain_input("Wrong customer")}})
    assert ok.status == 200 and ok.text in ("", "{}")
    first = await item_state(app, req["id"], 0)
    assert (first["outcome"], first["comment"], first["via"]) == ("rejected", "Wrong customer", "modal")

    view = await open_item(app, req["id"], 2, REPLY)
    await submit(app, view, {"reason": {"value": plain_input("Sent it by hand already.")}})
    await item_state(app, req["id"], 2)
    view = await open_item(app, req["id"], 3, EDIT)
    assert view["submit"]["text"] == "Approve"  # Edit approves that action with the edits
    await submit(app, view, {"p:to": {"value": plain_input("c3@example.com")},
                             "p:subject": {"value": plain_input("Refund of $45")}})
    await item_state(app, req["id"], 3)
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}")
    assert body["status"] == "pending" and [i["outcome"] for i in body["items"]] == [
        "rejected", None, "rejected", "approved"]
    await drain(app)
    waiting = app.slack.messages[(card.channel, card.ts)]
    valid(waiting.blocks)
    assert [controls(waiting, n) for n in range(4)] == [[], [PICK, REJECT], [], []]

    await approve_selected(app, req["id"], [1], user="U2")
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert body["status"] == "approved"
    items = body["decision"]["items"]
    assert [(i["outcome"], i["via"], i["comment"]) for i in items] == [
        ("rejected", "modal", "Wrong customer"), ("approved", "button", None),
        ("rejected", "reply", "Sent it by hand already."), ("approved", "modal", None)]
    assert items[3]["params"] == {"to": "c3@example.com", "subject": "Refund of $45"}
    assert items[3]["changes"] == [{"field": "subject", "from": "Refund 3", "to": "Refund of $45"}]
    assert all(i["params_sha256"] == params_sha256(i["params"]) for i in items)
    assert [i["decided_by"]["id"] for i in items] == ["U1", "U2", "U1", "U1"]
    await drain(app)
    final = app.slack.messages[(card.channel, card.ts)]
    valid(final.blocks)
    shown = json.dumps(final.blocks, ensure_ascii=False)
    assert "Reason: Wrong customer" in shown and "Reply: Sent it by hand already." in shown
    lines = [b["text"]["text"] for b in final.blocks if b["type"] == "section" and "@example.com" in b["text"]["text"]]
    assert [line.split(" ", 1)[0] for line in lines] == ["❌", "✅", "↩️", "✅"]
    assert "(edited: subject)" in lines[3] and not any(b["type"] == "actions" for b in final.blocks)

    # The client's types: one ItemDecision per action, the reply apart from a rejection.
    with SignoffClient(app.url, API_TOKEN) as client:
        decision = Decision.from_request(await asyncio.to_thread(client.get, req["id"]))
    assert decision is not None and [type(i) for i in decision.items] == [ItemDecision] * 4
    assert [i.approved for i in decision.items] == [False, True, False, True]
    assert decision.items[2].reply == "Sent it by hand already." and decision.items[0].reply is None
    assert decision.items[0].comment == "Wrong customer" and decision.items[3].edited


def test_the_client_refuses_an_approved_action_whose_parameters_are_not_the_approved_ones() -> None:
    item = {"name": "send_email", "outcome": "approved", "params": {"to": "evil@example.com"},
            "params_sha256": params_sha256({"to": "a@example.com"}), "changes": []}
    body = {"id": "apr_1", "status": "approved", "decision": {"outcome": "approved", "params": {}, "items": [item]}}
    with pytest.raises(ParamsChanged, match="action 1"):
        Decision.from_request(body)
    rejected = {**item, "outcome": "rejected"}  # never run: nothing to check
    assert Decision.from_request({**body, "decision": {**body["decision"], "items": [rejected]}}) is not None


async def test_choices_an_action_does_not_offer_and_bad_input_write_nothing(app: App) -> None:
    req = await submit_mixed(app)
    card = await app.card(req["id"])
    await drain(app)
    before = await snapshot(app, req["id"])
    refusals = [
        (click_item(app, req["id"], 1, EDIT), ["Action 2 (send_email) cannot be edited"]),
        (click_item(app, req["id"], 0, REPLY), ["Action 1 (send_email) cannot be answered with a reply"]),
        (click_item(app, req["id"], 9, REJECT), ["does not belong"]),
        # Approve selected that would approve action 4 (edit or reject only).
        (approve_selected(app, req["id"], [0, 1, 3]), ["Action 4 (send_email) cannot be approved as it is"]),
    ]
    for click, expected in refusals:
        text = await told(app, click)
        assert all(e in text for e in expected) and text.endswith("Nothing was changed."), text
    assert app.slack.calls_to("views.open") == []

    # Modals: invalid against the schema, a blank reply, metadata naming another or no action.
    edit = await open_item(app, req["id"], 0, EDIT)
    bad = await submit(app, edit, {"p:to": {"value": plain_input(None)}, "p:subject": {"value": plain_input("x")}})
    assert bad.json()["response_action"] == "errors" and "p:to" in bad.json()["errors"]
    meta = json.loads(edit["private_metadata"])
    for index, expected in [(1, "cannot be edited"), (9, "does not belong"), ("0", "does not belong")]:
        forged = await submit(app, edit, {"p:to": {"value": plain_input("a@example.com")},
                                          "p:subject": {"value": plain_input("x")}},
                              private_metadata=json.dumps({**meta, "item": index}))
        assert expected in json.dumps(forged.json()), (index, forged.json())
    reply = await open_item(app, req["id"], 2, REPLY)
    blank = await submit(app, reply, {"reason": {"value": plain_input("  ")}})
    assert blank.json() == {"response_action": "errors", "errors": {"reason": "Write the reply the agent should get."}}
    huge = await submit(app, reply, {"reason": {"value": plain_input("x" * 2001)}})
    assert "at most 2000" in huge.json()["errors"]["reason"]
    outsider = await submit(app, reply, {"reason": {"value": plain_input("hi")}}, user="UOUT")
    assert "not one of the approvers" in outsider.json()["errors"]["reason"]
    await drain(app)
    assert await snapshot(app, req["id"]) == before

    # The agent API: decisions are per action.
    both = mixed_body(allowed_decisions=["approve"])
    status, answer = await app.api("POST", "/api/v1/approvals", json=both)
    assert status == 400 and "give it on each item" in answer["error"]["message"]
    wrong = mixed_body()
    wrong["items"][1]["allowed_decisions"] = ["approve", "maybe"]
    status, answer = await app.api("POST", "/api/v1/approvals", json=wrong)
    assert status == 400 and any("items.1.allowed_decisions" in d["field"] for d in answer["error"]["details"]), answer


async def test_two_people_at_once_end_with_exactly_one_outcome_per_action(app: App) -> None:
    for _ in range(3):
        req = await submit_mixed(app)
        # One action, two people: one rejects it with a reason while the other edits and approves it.
        reject_view = await open_item(app, req["id"], 0, REJECT, user="U1")
        edit_view = await open_item(app, req["id"], 0, EDIT, user="U2")
        notes = len(app.slack.calls_to("chat.postEphemeral"))
        answers = await asyncio.gather(
            submit(app, reject_view, {"reason": {"value": plain_input("No")}}, user="U1"),
            submit(app, edit_view, {"p:to": {"value": plain_input("c0@example.com")},
                                    "p:subject": {"value": plain_input("Edited")}}, user="U2"))
        first = await item_state(app, req["id"], 0)
        winner = first["decided_by"]["id"]
        assert (first["outcome"], first["comment"]) == (("rejected", "No") if winner == "U1" else ("approved", None))
        loser = 1 if winner == "U1" else 0
        if answers[loser].text not in ("", "{}"):  # checked after the winner wrote: an inline error
            assert "Action 1 is already" in json.dumps(answers[loser].json())
        else:  # both passed the check; the guarded write refused the second
            await app.slack.wait_for("chat.postEphemeral", count=notes + 1)
            assert ephemerals_to(app, "U2" if winner == "U1" else "U1")[-1].startswith("Action 1 was already")

        # The same page, two people, different ticks: the first one's choices decide every waiting action.
        notes = len(app.slack.calls_to("chat.postEphemeral"))
        await asyncio.gather(approve_selected(app, req["id"], [1, 2], user="U1"),
                             approve_selected(app, req["id"], [2], user="U2"))
        _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
        items = body["decision"]["items"]
        decider = body["decision"]["decided_by"]["id"]
        assert {items[n]["decided_by"]["id"] for n in (1, 2, 3)} == {decider}
        assert [items[n]["outcome"] for n in (1, 2, 3)] == [
            "approved" if decider == "U1" else "rejected", "approved", "rejected"]
        await app.slack.wait_for("chat.postEphemeral", count=notes + 1)
        assert ephemerals_to(app, "U2" if decider == "U1" else "U1")[-1].startswith("Already approved by")
        assert app.signoff is not None
        events = [e.type for e in await app.signoff.store.audit_events(req["id"])]
        assert events.count("decided") == 1 and events.count("items_decided") == 1


def test_a_page_of_decided_actions_with_long_reasons_stays_within_slacks_limits() -> None:
    from bot.domain.model import Action, Actor, Decision as Decided, Item, Kind, Outcome, Request, Risk, Status, Via
    from bot.slack.batch_blocks import batch_page
    from bot.slack.blocks import TOTAL_TEXT_BUDGET
    from bot.slack.previews import text_length

    now = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    params = {f"field_{k}": "x" * 400 for k in range(12)}
    items = tuple(Item(Action("send_email", params), outcome=Outcome.REJECTED, decided_by=Actor("U1"),
                       via=Via.REPLY if n % 2 else Via.MODAL, comment=f"reason {n} " + "r" * 3000) for n in range(20))
    decision = Decided(Outcome.REJECTED, {}, (), "all " + "c" * 3000, Actor("U1"), now, Via.MODAL, items=items)
    request = Request(id="apr_1", kind=Kind.APPROVAL, status=Status.REJECTED, action=Action("batch", {}),
                      summary="s" * 3000, risk=Risk.HIGH, channel="C1", created_at=now, updated_at=now,
                      context="c" * 20000, items=items, decision=decision)
    blocks = batch_page(request, 0, now=now)["blocks"]
    valid(blocks)
    assert text_length(blocks) <= TOTAL_TEXT_BUDGET
    notes = [b["elements"][0]["text"] for b in blocks if b["type"] == "context" and "reason " in json.dumps(b)]
    assert len(notes) == 20 and notes[1].startswith("Reply: reason 1") and notes[0].startswith("Reason: reason 0")


async def test_an_action_form_whose_group_lookup_does_not_answer_gets_an_inline_error(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """An action's form is checked before its ack: a user group's lookup that does not answer in time
    is said in the form, naming the group, and nothing is written."""
    import bot.slack.batch as batch
    from bot.slack.directory import SlackDirectory
    assert app.signoff is not None
    app.slack.add_usergroup("SOPS", ["U1"])
    req = await submit_mixed(app, approvers=["SOPS"])
    await app.card(req["id"])
    await drain(app)
    view = await open_item(app, req["id"], 0, REJECT)
    before = await snapshot(app, req["id"])
    directory = app.signoff.service.directory
    assert isinstance(directory, SlackDirectory)
    directory._groups.clear()
    monkeypatch.setattr(batch, "PRE_ACK_LOOKUP_SECONDS", 0.2)
    app.slack.hang("usergroups.users.list", apply=True)
    try:
        response = await submit(app, view, {"reason": {"value": plain_input("not this one")}})
        body = response.json()
        assert body["response_action"] == "errors" and "Slack did not say who is in @SOPS" in body["errors"]["reason"]
    finally:
        app.slack.release_hung()
    await drain(app)
    assert await snapshot(app, req["id"]) == before
