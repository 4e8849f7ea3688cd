"""Escalate by hand with a note; the manager is told and can approve; late clicks; hand back."""

from __future__ import annotations

from typing import Any

import pytest

from bot.domain.model import Actor
from bot.slack.directory import SlackDirectory
from bot.approvals.timers import Refused
from tests.support.outbox import settle
from tests.fakes.clock import FakeClock
from bot.sandbox.signed import checkboxes, plain_input, static_select
from tests.support.app import App
from tests.slack.test_checked_decisions import written_during_the_check
from tests.slack.test_known import another_process_writes
from tests.approvals.timer_steps import context_texts, describe, effects, tick


async def open_escalate(app: App, request_id: str, user: str) -> dict[str, Any]:
    opened = len(app.slack.calls_to("views.open"))
    await app.click(request_id, user, action="signoff_escalate", user_name=user.lower())
    return (await app.slack.wait_for("views.open", count=opened + 1))[-1].args["view"]


def target_options(view: dict[str, Any]) -> list[str]:
    """The values the form's "Escalate to" menu offers."""
    return [o["value"] for o in next(b for b in view["blocks"] if b.get("block_id") == "target")["element"]["options"]]


async def submit_escalate(app: App, view: dict[str, Any], user: str, *, target: str, person: str | None = None,
                          note: str | None = None, step_back: bool = False) -> Any:
    values: dict[str, Any] = {
        "target": {"value": static_select(target)},
        "person": {"value": {"type": "users_select", "selected_user": person}},
        "note": {"value": plain_input(note)},
    }
    if step_back:
        values["step_back"] = {"value": checkboxes(["yes"])}
    return await app.slack_client.view_submission(user=user, user_name=user.lower(), callback_id=view["callback_id"],
                                                  private_metadata=view["private_metadata"], values=values)


async def escalation_form_of_a_group(app: App) -> tuple[dict[str, Any], dict[str, Any]]:
    """A request to user group SOPS (U1) with one escalation level, its card shown; U1 opens its
    Escalate form. The request and the form."""
    app.slack.add_usergroup("SOPS", ["U1"])
    req = await app.submit(approvers=["SOPS"], timeout="2h", escalation={"levels": [{"after": "30m",
                                                                                     "notify": ["UMGR"]}]})
    await app.card(req["id"])
    await settle(app)
    return req, await open_escalate(app, req["id"], "U1")


def directory_of(app: App) -> SlackDirectory:
    assert app.signoff is not None
    directory = app.signoff.service.directory
    assert isinstance(directory, SlackDirectory)
    return directory


async def test_escalate_by_hand_with_a_note_then_the_manager_approves(tapp: App, clock: FakeClock) -> None:
    app, slack = tapp, tapp.slack
    assert app.signoff is not None
    store = app.signoff.store
    await app.slack_client.event({"type": "app_home_opened", "user": "UMGR", "tab": "home", "event_ts": "1.0"})
    req = await app.submit(reminders=False, timeout="2h",
                           escalation={"levels": [{"after": "30m", "notify": ["UMGR"]}]})
    card = await app.card(req["id"])
    await settle(app)

    view = await open_escalate(app, req["id"], "U1")
    target = next(b for b in view["blocks"] if b.get("block_id") == "target")["element"]
    assert [o["value"] for o in target["options"]] == ["next", "person"]  # no hand-back: nobody escalated yet
    assert target["initial_option"]["value"] == "next"  # default: the next configured level
    assert any(b.get("block_id") == "step_back" for b in view["blocks"])

    clock.advance(minutes=5)
    mark = len(slack.calls)
    note = "Over my refund limit <!channel>"
    posts = len(slack.calls_to("chat.postMessage"))
    response = await submit_escalate(app, view, "U1", target="next", note=note, step_back=True)
    assert response.status == 200 and response.text in ("", "{}")
    await slack.wait_for("chat.postMessage", count=posts + 2)  # the escalation runs after the ack
    await settle(app)
    calls = effects(slack, mark)
    # (App Home may look the card's permalink up too, when it renders before the escalation stored it.)
    assert sorted(describe(c, card.ts) for c in calls if c.method != "chat.getPermalink") == sorted([
        ("chat.postMessage", "thread"), ("chat.update", "card"), ("chat.postMessage", "dm:UMGR"),
        ("views.publish", "UMGR"),
    ])
    assert describe(calls[0], card.ts) == ("chat.getPermalink", "card")
    thread = next(c for c in calls if describe(c, card.ts) == ("chat.postMessage", "thread"))
    assert thread.args["text"] == ("⬆️ <@U1> escalated this to <@UMGR> (level 1 of 1).\n"
                                   ">Over my refund limit &lt;!channel&gt;")  # a person's note cannot ping
    dm = next(c for c in calls if describe(c, card.ts) == ("chat.postMessage", "dm:UMGR"))
    assert "escalated to you (level 1 of 1) by <@U1>" in dm.args["text"]
    assert ">Over my refund limit &lt;!channel&gt;" in dm.args["text"]
    assert "<https://fake-slack.test/archives/C1/p" in dm.args["text"]
    notes = context_texts(slack.messages[(card.channel, card.ts)].blocks)
    assert "⬆️ Escalated to <@UMGR> (level 1 of 1) by <@U1>" in notes
    assert "📝 <@U1>: “Over my refund limit &lt;!channel&gt;”" in notes
    home = slack.home_views["UMGR"]
    assert [b["text"]["text"] for b in home["blocks"] if b["type"] == "header"][2] == "Escalated to you (1)"

    audit = [e for e in await store.audit_events(req["id"]) if e.type in ("escalated", "stepped_back")]
    assert [(e.type, e.actor) for e in audit] == [("escalated", "U1"), ("stepped_back", "U1")]
    assert audit[0].data | {"sweeper": None} == {"level": 1, "of": 1, "loop": 0, "to": ["UMGR"], "via": "hand",
                                                 "note": note, "sweeper": None}
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}")
    assert body["approvers"] == ["U2", "UMGR"]

    # U1 stepped back: their late click is told the request was escalated, and writes nothing.
    before = (await store.get_request(req["id"]), await store.audit_events(req["id"]))
    told = len(slack.calls_to("chat.postEphemeral"))
    await app.click(req["id"], "U1", user_name="alice")
    [late] = (await slack.wait_for("chat.postEphemeral", count=told + 1))[told:]
    assert late.args["user"] == "U1"
    assert late.args["text"].startswith("This request was escalated to <@UMGR>, and you are no longer one of its")
    await settle(app)
    assert (await store.get_request(req["id"]), await store.audit_events(req["id"])) == before

    # The level was reached by hand: the timer does not escalate to it again at 30m.
    mark = len(slack.calls)
    await tick(app, clock, minutes=30)
    assert effects(slack, mark) == []

    await app.click(req["id"], "UMGR", user_name="manager")
    _, final = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert final["status"] == "approved" and final["decision"]["decided_by"]["id"] == "UMGR"


async def test_an_approver_who_stays_still_decides_and_a_manager_can_hand_back(tapp: App, clock: FakeClock) -> None:
    app, slack = tapp, tapp.slack
    first = await app.submit(reminders=False, escalation=False, timeout=False)
    second = await app.submit(summary="Refund order 77", reminders=False, escalation=False, timeout=False)
    for req in (first, second):
        await app.card(req["id"])
        view = await open_escalate(app, req["id"], "U1")
        assert target_options(view) == ["person"]  # no configured levels: pick a person
        missing = await submit_escalate(app, view, "U1", target="person")
        assert missing.json() == {"response_action": "errors", "errors": {"person": "Pick the person to escalate to."}}
        await submit_escalate(app, view, "U1", target="person", person="U3", note="Second pair of eyes")
    await slack.wait_for("chat.postMessage", count=6)  # 2 cards, then per request a thread post and a DM
    await settle(app)
    dms = [c.args for c in slack.calls_to("chat.postMessage") if c.args["channel"] == "U3"]
    assert len(dms) == 2 and all("escalated to you by <@U1>" in d["text"] and "Second pair of eyes" in d["text"]
                                 for d in dms)

    # U2 was an approver before and still is: the late click works, and says the request had moved on.
    told = len(slack.calls_to("chat.postEphemeral"))
    await app.click(first["id"], "U2", user_name="bob")
    _, decided = await app.api("GET", f"/api/v1/approvals/{first['id']}?wait=5")
    assert decided["status"] == "approved" and decided["decision"]["decided_by"]["id"] == "U2"
    [note] = (await slack.wait_for("chat.postEphemeral", count=told + 1))[told:]
    assert note.args["user"] == "U2" and "had been escalated to <@U3>" in note.args["text"]

    # The person it was escalated to hands the other one back, with a comment.
    view = await open_escalate(app, second["id"], "U3")
    assert target_options(view) == ["back", "person"]
    mark = len(slack.calls)
    await submit_escalate(app, view, "U3", target="back", note="Ask the customer first")
    await slack.wait_for("chat.postMessage", count=8)
    await settle(app)
    card = await app.card(second["id"])
    posted = [c.args for c in effects(slack, mark) if c.method == "chat.postMessage"]
    assert posted[0]["thread_ts"] == card.ts
    assert posted[0]["text"] == "↩️ <@U3> handed this back to <@U1>.\n>Ask the customer first"
    assert posted[1]["channel"] == "U1" and "<@U3> handed an approval request back to you" in posted[1]["text"]
    assert "↩️ Handed back to <@U1> by <@U3>" in context_texts(slack.messages[(card.channel, card.ts)].blocks)
    audit = await app.signoff.store.audit_events(second["id"])  # type: ignore[union-attr]
    assert [(e.type, e.actor, e.data.get("note")) for e in audit if e.type == "handed_back"] == [
        ("handed_back", "U3", "Ask the customer first")]
    await app.click(second["id"], "U1", user_name="alice")
    _, final = await app.api("GET", f"/api/v1/approvals/{second['id']}?wait=5")
    assert final["status"] == "approved" and final["decision"]["decided_by"]["id"] == "U1"


async def test_escalating_or_snoozing_by_someone_taken_away_meanwhile_is_refused_and_writes_nothing(
        tapp: App) -> None:
    """The move is checked (who is in SOPS: Slack holds that answer) while another process takes the
    person away; it is written only on a state on which they may make it (bot/approvals/checked.py)."""
    app = tapp
    assert app.signoff is not None
    directory_of(app).ttl = 0  # every check asks Slack who is in the group
    req, view = await escalation_form_of_a_group(app)
    before = await app.signoff.store.get_request(req["id"])
    assert before is not None and before.timers is not None
    await written_during_the_check(app, req["id"], lambda: submit_escalate(app, view, "U1", target="next"),
                                   approvers=("U9",))
    [note] = await app.slack.wait_for("chat.postEphemeral")
    assert "You are not one of the approvers of this request" in note.args["text"]
    await another_process_writes(app, req["id"], approvers=("SOPS",))  # U1 may again
    await written_during_the_check(app, req["id"], lambda: app.click(req["id"], "U1", action="signoff_snooze"),
                                   approvers=("U8",))
    notes = await app.slack.wait_for("chat.postEphemeral", count=2)
    assert "You are not one of the approvers of this request" in notes[1].args["text"]
    await settle(app)
    stored = await app.signoff.store.get_request(req["id"])
    assert stored is not None and stored.version == before.version + 3 and stored.approvers == ("U8",)
    assert stored.timers == before.timers  # neither escalated nor snoozed
    events = [e.type for e in await app.signoff.store.audit_events(req["id"])]
    assert "escalated" not in events and "snoozed" not in events


async def test_an_escalation_form_whose_group_lookup_does_not_answer_gets_an_inline_error(
        tapp: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """The form is checked before its ack: a user group's lookup that does not answer in time is said
    in the form (an inline error naming the group), not left to Slack's own error after 3 s."""
    import bot.slack.timer_buttons as timer_buttons
    app = tapp
    assert app.signoff is not None
    req, view = await escalation_form_of_a_group(app)
    before = await app.signoff.store.get_request(req["id"])
    monkeypatch.setattr(timer_buttons, "PRE_ACK_LOOKUP_SECONDS", 0.2)
    directory_of(app)._groups.clear()
    app.slack.hang("usergroups.users.list", apply=True)
    try:
        response = await submit_escalate(app, view, "U1", target="next")
        body = response.json()
        assert body["response_action"] == "errors", body
        assert "Slack did not say who is in @SOPS" in body["errors"]["target"], body  # markup stripped for a form
    finally:
        app.slack.release_hung()
    await settle(app)
    assert await app.signoff.store.get_request(req["id"]) == before  # not escalated


async def test_someone_it_was_escalated_to_may_pass_it_on_only_from_its_own_card(tapp: App) -> None:
    """The person a level notified may open the form without being an approver, but cannot name a
    person; a button that is not on the request's card is refused for them as for anyone."""
    app, slack = tapp, tapp.slack
    req = await app.submit(timeout="2h", escalation={"levels": [{"after": "30m", "notify": ["UMGR"],
                                                                 "add_as_approvers": False}]})
    await app.card(req["id"])
    await settle(app)
    view = await open_escalate(app, req["id"], "U1")
    assert "person" in target_options(view)  # U1 may decide, so may name a person
    await submit_escalate(app, view, "U1", target="next")
    await slack.wait_for("chat.postMessage", count=3)  # (written after the ack) the card, the thread post, the DM
    await settle(app)
    stored = await app.signoff.store.get_request(req["id"])  # type: ignore[union-attr]
    assert stored is not None and stored.timers is not None and "UMGR" in stored.timers.escalated_to
    assert "UMGR" not in stored.approvers

    card = await app.card(req["id"])
    opened, told = len(slack.calls_to("views.open")), len(slack.calls_to("chat.postEphemeral"))
    await app.slack_client.block_action(user="UMGR", action_id="signoff_escalate", value=req["id"], block_id="decide",
                                        channel=card.channel, message_ts="1700000000.000001", user_name="manager")
    [note] = (await slack.wait_for("chat.postEphemeral", count=told + 1))[told:]
    assert note.args["user"] == "UMGR" and "does not belong to the card" in note.args["text"]
    assert len(slack.calls_to("views.open")) == opened

    assert "person" not in target_options(await open_escalate(app, req["id"], "UMGR"))


async def test_only_someone_it_was_escalated_to_may_hand_it_back(tapp: App) -> None:
    """The form offers "hand back" only to the people the request was escalated to; a submission that
    asks for it anyway (from an approver it was not escalated to) gets an inline error and changes nothing."""
    app, slack = tapp, tapp.slack
    assert app.signoff is not None
    req = await app.submit(reminders=False, escalation=False, timeout=False)
    await app.card(req["id"])
    form = await open_escalate(app, req["id"], "U1")
    await submit_escalate(app, form, "U1", target="person", person="U3")
    await slack.wait_for("chat.postMessage", count=3)  # the card, the thread post, U3's DM
    await settle(app)
    before = await app.signoff.store.get_request(req["id"])
    assert before is not None and before.timers is not None and before.timers.escalated_to == ("U3",)

    for user in ("U1", "U2"):  # still approvers, never escalated to
        form = await open_escalate(app, req["id"], user)
        assert "back" not in target_options(form)
        answer = await submit_escalate(app, form, user, target="back", note="forged")
        assert answer.json() == {"response_action": "errors",
                                 "errors": {"target": "Only someone this request was escalated to can hand it back."}}
    await settle(app)
    after = await app.signoff.store.get_request(req["id"])
    assert after is not None and after.version == before.version and after.timers == before.timers
    assert "handed_back" not in [e.type for e in await app.signoff.store.audit_events(req["id"])]

    # The rule holds where the move is written, whoever calls it (not only behind the form's check).
    assert app.signoff.timers is not None
    refused = await app.signoff.timers.hand_back(req["id"], Actor("U1", "alice"), note=None)
    assert isinstance(refused, Refused) and refused.text.startswith("Only someone this request was escalated to")
    assert (await app.signoff.store.get_request(req["id"])) == after

    form = await open_escalate(app, req["id"], "U3")  # U3 may
    assert "back" in target_options(form)
    assert (await submit_escalate(app, form, "U3", target="back")).status == 200
    await slack.wait_for("chat.postMessage", count=5)  # (written after the ack) the thread post, U1's DM
    await settle(app)
    handed = await app.signoff.store.get_request(req["id"])
    assert handed is not None and handed.timers is not None and handed.timers.handed_back
