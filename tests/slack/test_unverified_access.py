"""When Slack cannot say who is in a user group, a person whose right to decide rests on that group is
told so, and nothing of theirs is written.

The approvers are a user group, and every check asks Slack who is in it (the directory's cache set to
expire at once, as it does after five minutes). Slack fails that lookup (an error answer, or 5xx on
every retry): the person's click or form cannot be checked. It must not be recorded (fail closed) and
must not vanish either: the person gets a note that names the group and says nothing was recorded,
and trying again once Slack answers decides the request."""

from __future__ import annotations

import json

import pytest

from bot.domain.model import Status
from bot.sandbox.signed import plain_input
from bot.slack.directory import SlackDirectory
from tests.support.outbox import drain
from tests.support.app import App
from tests.slack.test_checked_decisions import GROUP, LOOKUP, note_to, shown

from tests.slack.test_grants_flow import MAIL, POLICY
from tests.slack.test_grants_flow import submit as submit_mail

UNKNOWN = "Slack did not say who is in <!subteam^SOPS>"


pytestmark = pytest.mark.policy(POLICY, usergroups={GROUP: ["U1"]}, live_directory=True)


async def pending_untouched(app: App, request_id: str, version: int) -> None:
    await drain(app)
    assert app.signoff is not None
    stored = await app.signoff.store.get_request(request_id)
    assert stored is not None and stored.status is Status.PENDING and stored.version == version
    assert "decided" not in [e.type for e in await app.signoff.store.audit_events(request_id)]


def slack_answers_again(app: App) -> None:
    """Slack is back, and the moment the directory remembers a failed lookup for has passed."""
    app.slack.clear_faults()
    assert app.signoff is not None
    directory = app.signoff.service.directory
    assert isinstance(directory, SlackDirectory)
    directory._failed.clear()


def lookup_fails(app: App, how: str) -> None:
    if how == "error":
        app.slack.error(LOOKUP, "fatal_error", times=2)
    else:  # the server errors on the first call and on every retry slack_sdk makes
        app.slack.fail(LOOKUP, status=503, times=10)


@pytest.mark.parametrize("how", ["error", "5xx"])
async def test_a_click_that_cannot_be_checked_is_told_and_writes_nothing(papp: App, how: str) -> None:
    req = await submit_mail(papp, MAIL, approvers=[GROUP])
    version = await shown(papp, req["id"])
    lookup_fails(papp, how)
    await papp.click(req["id"], "U1")
    note = await note_to(papp, "U1")
    assert UNKNOWN in note and "your click was not recorded" in note and "Try again" in note
    await pending_untouched(papp, req["id"], version)

    slack_answers_again(papp)
    await papp.click(req["id"], "U1")  # Slack answers now: the click is checked and decided
    _, body = await papp.api("GET", f"/api/v1/approvals/{req['id']}?wait=10")
    assert body["status"] == "approved" and body["decision"]["decided_by"]["id"] == "U1"


async def test_a_form_that_cannot_be_checked_after_its_ack_is_told_and_writes_nothing(papp: App) -> None:
    req = await submit_mail(papp, MAIL, approvers=[GROUP], allowed_decisions=["approve", "reject"])
    version = await shown(papp, req["id"])
    lookup_fails(papp, "error")
    meta = json.dumps({"request_id": req["id"], "version": version, "channel": "C1"})
    await papp.slack_client.view_submission(user="U1", user_name="alice", callback_id="signoff_reject",
                                            private_metadata=meta,
                                            values={"reason": {"value": plain_input("Not this one")}})
    note = await note_to(papp, "U1")
    assert UNKNOWN in note and "your answer was not recorded" in note
    await pending_untouched(papp, req["id"], version)


async def test_someone_listed_by_name_is_not_held_up_by_the_group_lookup(papp: App) -> None:
    """The group is only asked about when the person is not listed themselves."""
    req = await submit_mail(papp, MAIL, approvers=["U2", GROUP])
    await shown(papp, req["id"])
    lookup_fails(papp, "error")
    await papp.click(req["id"], "U2")
    _, body = await papp.api("GET", f"/api/v1/approvals/{req['id']}?wait=10")
    assert body["status"] == "approved"


async def test_a_token_without_usergroups_read_says_what_to_fix_not_try_again(papp: App) -> None:
    """Slack refuses the lookup for good (the app was installed without usergroups:read): the note says
    a retry will not help, and names the scope to add (bot/slack/failures.py's fix)."""
    from bot.sandbox.scopes import NEEDED
    req = await submit_mail(papp, MAIL, approvers=[GROUP])
    version = await shown(papp, req["id"])
    papp.slack.scopes = {s for scopes in NEEDED.values() for s in scopes} - {"usergroups:read"}
    await papp.click(req["id"], "U1")
    note = await note_to(papp, "U1")
    assert "Slack refuses to tell Signoff who is in <!subteam^SOPS> (missing_scope)" in note
    assert "your click was not recorded" in note and "usergroups:read" in note and "Try again" not in note
    await pending_untouched(papp, req["id"], version)
