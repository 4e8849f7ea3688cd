"""An edit is re-evaluated by policy: an edit that a deny rule or a person's deny grant refuses is an
inline error in the modal, and nothing is written; an edit policy allows approves as usual."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.grants import DENY, FieldMatch, Grant, Scope
from bot.sandbox.signed import plain_input
from storage.grants import GrantStore
from storage.stores import open_store
from tests.support.app import App

POLICY = """\
rules:
  - name: mail-stays-inside
    tool: send_email
    params: {to: {regex: "^(?!.*@example\\\\.com$)"}}
    effect: deny
    reason: email goes to example.com addresses only
"""


pytestmark = pytest.mark.policy(POLICY)


async def _edit(app: App, request_id: str, to: str) -> dict:
    opened = len(app.slack.calls_to("views.open"))
    await app.click(request_id, "U1", action="signoff_edit", user_name="alice")
    view = (await app.slack.wait_for("views.open", count=opened + 1))[-1].args["view"]
    values = {"p:to": {"value": plain_input(to)}, "p:subject": {"value": plain_input("Your refund")},
              "p:body": {"value": plain_input("Hello")}}
    response = await app.slack_client.view_submission(user="U1", user_name="alice", callback_id="signoff_edit",
                                                      values=values, private_metadata=view["private_metadata"])
    assert response.status == 200
    return response.json() if response.text not in ("", "{}") else {}


async def _pending(app: App) -> str:
    req = await app.submit()
    assert req["status"] == "pending"
    assert app.signoff is not None
    await app.signoff.dispatcher.drain()
    return str(req["id"])


async def _refused_then_approved(app: App, request_id: str, refused_to: str, why: str) -> None:
    """An edit to `refused_to` is an inline error naming `why`, with nothing written; another one approves."""
    assert app.signoff is not None
    before = await app.signoff.store.get_request(request_id)
    answer = await _edit(app, request_id, refused_to)
    assert answer["response_action"] == "errors"
    assert why in json.dumps(answer["errors"])
    assert await app.signoff.store.get_request(request_id) == before

    assert await _edit(app, request_id, "other@example.com") == {}
    _, decided = await app.api("GET", f"/api/v1/approvals/{request_id}?wait=5")
    assert decided["status"] == "approved" and decided["decision"]["params"]["to"] == "other@example.com"


async def test_an_edit_policy_denies_is_refused_inline_and_writes_nothing(papp: App) -> None:
    request_id = await _pending(papp)
    await _refused_then_approved(papp, request_id, "someone@evil.test", "email goes to example.com addresses only")


async def _deny_from_another_replica(db_url: str, grant_id: str, to_glob: str) -> None:
    other = await open_store(db_url)
    try:
        now = datetime.now(UTC)
        deny = Grant(grant_id, "send_email", {"to": FieldMatch("glob", to_glob)}, Scope.EVERYONE, None,
                     "U9", now - timedelta(seconds=1), expires_at=now + timedelta(hours=1), any_other_params=True,
                     effect=DENY)
        async with other.unit() as unit:
            await GrantStore(other).add(unit, deny)
    finally:
        await other.close()


async def test_an_edit_a_deny_grant_refuses_is_refused_inline_and_writes_nothing(papp: App, db_url: str) -> None:
    # A person's deny (made on another replica after this one cached the tool's grants) holds for edits
    # as it does for submits: an approver cannot edit a call into one a colleague denied.
    request_id = await _pending(papp)
    await _deny_from_another_replica(db_url, "grt_no_ceo_mail", "ceo@*")
    await _refused_then_approved(papp, request_id, "ceo@example.com", "grt_no_ceo_mail")


async def test_a_deny_made_after_the_card_that_covers_the_call_as_asked_says_to_reject(papp: App,
                                                                                      db_url: str) -> None:
    request_id = await _pending(papp)
    await _deny_from_another_replica(db_url, "grt_no_customer_mail", "customer@*")
    answer = await _edit(papp, request_id, "customer@example.com")  # not "change it back": it is as asked
    assert answer["response_action"] == "errors"
    errors = json.dumps(answer["errors"])
    assert "Policy now denies this call" in errors and "grt_no_customer_mail" in errors and "Change it back" not in errors
