"""A person's decision is recorded only on a state of the request on which they may decide it
(bot/approvals/checked.py), on every path a person decides by: the Reject and Reply forms, Approve & remember,
a Claude suggestion's one tap and a batch's Approve selected (the Approve button: tests/slack/test_known.py;
a question's answer: tests/agent/test_questions.py).

Each test makes the same race happen for real: the approvers are a user group, so the check asks Slack
who is in it (usergroups.users.list; the directory's cache is set to expire at once, as it does after
five minutes). The fake Slack holds that answer while another process writes the request: it takes the
person away (nothing of theirs is written, they are told why) or keeps them (decided once, on the row
as it is now)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from bot.domain.model import Status
from bot.sandbox.signed import plain_input, radio, static_select
from tests.support.outbox import drain
from tests.approvals.batch_steps import approve_selected
from tests.approvals.test_batch_items import submit_mixed
from tests.support.app import App

from tests.slack.test_grants_flow import MAIL, POLICY
from tests.slack.test_grants_flow import submit as submit_mail
from tests.slack.test_known import another_process_writes
from tests.slack.test_policy_edits import _deny_from_another_replica
from tests.slack.test_suggestions_flow import NPM, bash, tap
from tests.slack.test_suggestions_flow import submit as submit_bash

GROUP = "SOPS"  # U1 is its one member
LOOKUP = "usergroups.users.list"


pytestmark = pytest.mark.policy(POLICY + "  - name: publishing\n    tool: Bash\n"
                                "    params: {command: {regex: \"--publish\"}}\n    effect: deny\n",
                                usergroups={GROUP: ["U1"]}, live_directory=True)


async def written_during_the_check(app: App, request_id: str, send: Callable[[], Awaitable[Any]],
                                   **changes: object) -> None:
    """`send()` a person's input; while Slack holds the answer to its check's group lookup, another
    process writes `changes` to the request; then Slack answers."""
    seen = len(app.slack.calls_to(LOOKUP, ok_only=False))
    app.slack.hang(LOOKUP, apply=True)
    sent = asyncio.create_task(send())
    await app.slack.wait_for(LOOKUP, count=seen + 1, ok_only=False)
    await another_process_writes(app, request_id, **changes)
    app.slack.release_hung()
    await sent


async def note_to(app: App, user: str) -> str:
    [note] = [c for c in await app.slack.wait_for("chat.postEphemeral") if c.args["user"] == user]
    return str(note.args["text"])


async def untouched_since_the_other_write(app: App, request_id: str, version: int) -> None:
    """Still pending at the other process's version: no decision, vote or grant of the person's."""
    await drain(app)
    assert app.signoff is not None
    stored = await app.signoff.store.get_request(request_id)
    assert stored is not None and stored.status is Status.PENDING and stored.version == version + 1
    assert stored.decision is None and stored.votes == ()
    events = [e.type for e in await app.signoff.store.audit_events(request_id)]
    assert "decided" not in events and "voted" not in events and "items_decided" not in events
    _, grants = await app.api("GET", "/api/v1/grants")
    assert grants["items"] == []


async def shown(app: App, request_id: str) -> int:
    """Once the request's card is posted and its ts stored: the request's version."""
    await app.card(request_id)
    await drain(app)
    assert app.signoff is not None
    stored = await app.signoff.store.get_request(request_id)
    assert stored is not None
    return stored.version


def form(app: App, request_id: str, callback_id: str, values: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
    meta = json.dumps({"request_id": request_id, "version": 2, "channel": "C1"})
    return lambda: app.slack_client.view_submission(user="U1", user_name="alice", callback_id=callback_id,
                                                    private_metadata=meta, values=values)


FORMS = {"reject": ("signoff_reject", "rejected"), "respond": ("signoff_respond", "rejected")}


async def form_sent_during_the_check(app: App, kind: str, **changes: object) -> tuple[dict[str, Any], int]:
    """A request to GROUP, its card shown; U1 sends its `kind` form while another process writes
    `changes`. The request, and its version before that write."""
    req = await submit_mail(app, MAIL, approvers=[GROUP], allowed_decisions=["approve", "reject", "respond"])
    version = await shown(app, req["id"])
    callback_id, _ = FORMS[kind]
    await written_during_the_check(app, req["id"], form(app, req["id"], callback_id,
                                                        {"reason": {"value": plain_input("Not this one")}}), **changes)
    return req, version


@pytest.mark.parametrize("kind", sorted(FORMS))
async def test_a_form_from_someone_taken_away_meanwhile_is_refused_and_writes_nothing(papp: App, kind: str) -> None:
    req, version = await form_sent_during_the_check(papp, kind, approvers=("U9",))
    assert "You are not one of the approvers of this request, so your answer was not recorded" in \
        await note_to(papp, "U1")
    await untouched_since_the_other_write(papp, req["id"], version)


@pytest.mark.parametrize("kind", sorted(FORMS))
async def test_a_form_from_someone_still_an_approver_decides_once_on_the_row_as_it_is(papp: App, kind: str) -> None:
    req, version = await form_sent_during_the_check(papp, kind, approvers=(GROUP, "U2"))
    _, status = FORMS[kind]
    _, decided = await papp.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert decided["status"] == status and decided["decision"]["decided_by"]["id"] == "U1"
    assert decided["approvers"] == [GROUP, "U2"]  # decided on the row the other process wrote
    await drain(papp)
    assert papp.signoff is not None
    stored = await papp.signoff.store.get_request(req["id"])
    assert stored is not None and stored.version == version + 2
    events = [e.type for e in await papp.signoff.store.audit_events(req["id"])]
    assert events.count("decided") == 1
    assert papp.slack.calls_to("chat.postEphemeral") == []


async def test_approve_and_remember_from_someone_taken_away_meanwhile_makes_no_decision_and_no_grant(
        papp: App) -> None:
    req = await submit_mail(papp, MAIL, approvers=[GROUP])
    version = await shown(papp, req["id"])
    await papp.click(req["id"], "U1", action="signoff_remember")
    [opened] = await papp.slack.wait_for("views.open")
    values = {"scope": {"scope": radio("everyone")}, "duration": {"duration": static_select("1d")}}
    await written_during_the_check(papp, req["id"], lambda: papp.slack_client.view_submission(
        user="U1", user_name="alice", callback_id="signoff_remember_view",
        private_metadata=opened.args["view"]["private_metadata"], values=values), approvers=("U9",))
    note = await note_to(papp, "U1")
    assert "not one of the approvers" in note and "No grant was made." in note
    await untouched_since_the_other_write(papp, req["id"], version)


async def test_a_suggestion_tapped_by_someone_taken_away_meanwhile_makes_no_decision_and_no_grant(
        papp: App) -> None:
    req = await submit_bash(papp, bash("npm test -- --ci", suggestions=[NPM], session="s1", approvers=[GROUP]))
    version = await shown(papp, req["id"])
    await written_during_the_check(papp, req["id"], lambda: tap(papp, req["id"], "U1"), approvers=("U9",))
    note = await note_to(papp, "U1")
    assert "not one of the approvers" in note and "No grant was made." in note
    await untouched_since_the_other_write(papp, req["id"], version)


async def test_approve_selected_by_someone_taken_away_meanwhile_decides_no_action(papp: App) -> None:
    req = await submit_mixed(papp, approvers=[GROUP])
    version = await shown(papp, req["id"])
    await written_during_the_check(papp, req["id"], lambda: approve_selected(papp, req["id"], [0, 1, 2]),
                                   approvers=("U9",))
    assert "not one of the approvers" in await note_to(papp, "U1")
    await untouched_since_the_other_write(papp, req["id"], version)
    _, body = await papp.api("GET", f"/api/v1/approvals/{req['id']}")
    assert [i["outcome"] for i in body["items"]] == [None] * 4


async def test_an_edit_a_deny_made_meanwhile_refuses_is_not_recorded(papp: App, db_url: str) -> None:
    """The edit form passed policy when sent; a colleague's deny grant lands on another replica before the
    decision is written (while its check asks Slack about the group): checked again then, it holds."""
    req = await submit_mail(papp, MAIL, approvers=[GROUP])
    version = await shown(papp, req["id"])
    await papp.click(req["id"], "U1", action="signoff_edit", user_name="alice")
    [opened] = await papp.slack.wait_for("views.open")
    values = {"p:to": {"value": plain_input("ceo@example.com")}, "p:subject": {"value": plain_input("Your refund")},
              "p:body": {"value": plain_input("Sent.")}}
    seen = len(papp.slack.calls_to(LOOKUP, ok_only=False))
    papp.slack.hang(LOOKUP, apply=True)
    sent = asyncio.create_task(papp.slack_client.view_submission(
        user="U1", user_name="alice", callback_id="signoff_edit",
        private_metadata=opened.args["view"]["private_metadata"], values=values))
    await papp.slack.wait_for(LOOKUP, count=seen + 1, ok_only=False)  # acked; the decision's check waits
    await _deny_from_another_replica(db_url, "grt_no_ceo_mail", "ceo@*")
    papp.slack.release_hung()
    answered = await sent
    assert answered.status == 200 and answered.text in ("", "{}")  # the form itself was fine when sent
    note = await note_to(papp, "U1")
    assert "Policy does not allow this edit" in note and "grt_no_ceo_mail" in note and "Nothing was changed." in note
    assert "Edit it again or reject the request." in note and "Change it back" not in note  # the form is closed
    await drain(papp)
    assert papp.signoff is not None
    stored = await papp.signoff.store.get_request(req["id"])
    assert stored is not None and stored.status is Status.PENDING and stored.version == version
    assert "decided" not in [e.type for e in await papp.signoff.store.audit_events(req["id"])]
