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


async def test_an_edit_policy_denies_is_refused_inline_and_writes_nothing(papp: App) -> None:
    req = await papp.submit()
    assert req["status"] == "pending"
    assert papp.signoff is not None
    await papp.signoff.dispatcher.drain()
    before = await papp.signoff.store.get_request(req["id"])
    answer = await _edit(papp, req["id"], "someone@evil.test")
    assert answer["response_action"] == "errors"
    assert "email goes to example.com addresses only" in json.dumps(answer["errors"])
    assert await papp.signoff.store.get_request(req["id"]) == before

    assert await _edit(papp, req["id"], "other@example.com") == {}
    _, decided = await papp.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert decided["status"] == "approved" and decided["decision"]["params"]["to"] == "other@example.com"


async def test_an_edit_a_deny_grant_refuses_is_refused_inline_and_writes_nothing(papp: App, db_url: str) -> None:
    # A person's deny (made on another replica after this one cached the tool's grants) holds for edits
    # as it does for submits: an approver cannot edit a call into one a colleague denied.
    req = await papp.submit()
    assert req["status"] == "pending"
    assert papp.signoff is not None
    await papp.signoff.dispatcher.drain()
    other = await open_store(db_url)
    try:
        now = datetime.now(UTC)
        deny = Grant("grt_no_ceo_mail", "send_email", {"to": FieldMatch("glob", "ceo@*")}, Scope.EVERYONE, None,
                     "U9", now - timedelta(seconds=1), expires_at=now + timedelta(hours=1), any_other_params=True,
                     effect=DENY)
        async with other.unit() as unit:
            await GrantStore(other).add(unit, deny)
    finally:
        await other.close()
    before = await papp.signoff.store.get_request(req["id"])
    answer = await _edit(papp, req["id"], "ceo@example.com")
    assert answer["response_action"] == "errors"
    assert "grt_no_ceo_mail" in json.dumps(answer["errors"])
    assert await papp.signoff.store.get_request(req["id"]) == before

    assert await _edit(papp, req["id"], "other@example.com") == {}
    _, decided = await papp.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert decided["status"] == "approved" and decided["decision"]["params"]["to"] == "other@example.com"
