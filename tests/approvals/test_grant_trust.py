"""Grants come only from a person's click in Slack (issue 33, defects 1, 6 and 10's grant part).

No API call makes a grant; an agent token lists only the grants made on its own requests and
cannot revoke; an admin token's revoke is recorded as `api:<name>`. A grant "for this agent" keys
on the token, never on `requested_by`. In Slack, a person sees and revokes only the grants they
made, those made on requests they are an approver of, or all of them as a `grant_admins` member."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.app import App
from bot.sandbox.signed import radio, static_select
from tests.support.app import submit_tool

A, B, OPS = "tok-agent-a-1", "tok-agent-b-2", "tok-ops-admin-3"
TOKENS = f"agent-a:{A}:agent,agent-b:{B}:agent,ops:{OPS}:admin"
POLICY = "grant_admins: [U5, SADMINS]\nrules:\n  - name: drops-are-critical\n    tool: drop_table\n    tier: critical\n"
MAIL = {"to": "ann@example.com", "subject": "Hi"}


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


pytestmark = [pytest.mark.security, pytest.mark.policy(POLICY, token=OPS, usergroups={"SADMINS": ["U6"]}, SIGNOFF_API_TOKENS=TOKENS)]


async def submit(app: App, token: str, params: dict[str, Any] = MAIL, **kw: Any) -> dict[str, Any]:
    return await submit_tool(app, "send_email", params, token=token, **kw)


async def granted(app: App, token: str, user: str = "U1", scope: str = "agent", **kw: Any) -> dict[str, Any]:
    """A grant made the real way: `user` submits the "Approve & remember" modal on `token`'s request."""
    asked = await submit(app, token, **kw)
    await app.card(asked["id"])
    opened = len(app.slack.calls_to("views.open"))
    await app.click(asked["id"], user, action="signoff_remember")
    view = (await app.slack.wait_for("views.open", count=opened + 1))[-1].args["view"]
    values = {"scope": {"scope": radio(scope)}, "duration": {"duration": static_select("forever")}}
    answer = await app.slack_client.view_submission(user=user, callback_id="signoff_remember_view",
                                                    private_metadata=view["private_metadata"], values=values)
    assert answer.status == 200 and answer.text in ("", "{}"), answer.text
    _, decided = await app.api("GET", f"/api/v1/approvals/{asked['id']}?wait=5")
    assert decided["status"] == "approved"
    _, listed = await app.api("GET", "/api/v1/grants")
    [grant] = [g for g in listed["items"] if g["request_id"] == asked["id"]]
    return dict(grant)


async def test_no_api_call_creates_a_grant(papp: App) -> None:
    asked = await submit(papp, A)
    await papp.click(asked["id"], "U1")
    _, decided = await papp.api("GET", f"/api/v1/approvals/{asked['id']}?wait=5")
    assert decided["status"] == "approved"
    forged = {"tool": "send_email", "match": {"to": {"op": "glob", "value": "*"}, "subject": {"op": "glob", "value": "*"}},
              "scope": "everyone", "duration": "forever", "created_by": "U1", "request_id": asked["id"]}
    for token in (A, B, OPS):  # the request's own token, another token, even an admin token
        status, body = await papp.api("POST", "/api/v1/grants", json=forged, headers=as_(token))
        assert status == 405 and "only by a person in Slack" in body["error"]["message"], body
    _, listed = await papp.api("GET", "/api/v1/grants")
    assert listed["items"] == []
    later = await submit(papp, A, {"to": "eve@evil.example", "subject": "anything"})
    assert later["status"] == "pending"
    await papp.card(later["id"])


async def test_an_agent_token_lists_only_grants_made_on_its_own_requests(papp: App) -> None:
    mine = await granted(papp, A)
    theirs = await granted(papp, B, params={"to": "bob@example.com", "subject": "Hi"})
    for token, expected in ((A, [mine["id"]]), (B, [theirs["id"]]), (OPS, [theirs["id"], mine["id"]])):
        status, listed = await papp.api("GET", "/api/v1/grants", headers=as_(token))
        assert status == 200 and [g["id"] for g in listed["items"]] == expected, token


async def test_only_an_admin_token_revokes_and_the_audit_names_it(papp: App) -> None:
    grant = await granted(papp, A)
    for body in (None, {}, {"by": "U2"}):
        status, answer = await papp.api("POST", f"/api/v1/grants/{grant['id']}/revoke", json=body, headers=as_(A))
        assert status == 403 and answer["error"]["code"] == "forbidden", answer
    status, answer = await papp.api("POST", f"/api/v1/grants/{grant['id']}/revoke", json={"by": "U2"})
    assert status == 400 and answer["error"]["details"][0]["field"] == "by"
    assert (await submit(papp, A))["status"] == "approved"  # still live: nothing was written
    status, revoked = await papp.api("POST", f"/api/v1/grants/{grant['id']}/revoke")
    assert status == 200 and revoked["revoked_by"] == "api:ops"
    assert papp.signoff is not None
    audit = [(e.type, e.actor) for e in await papp.signoff.store.audit_events(grant["id"])]
    assert audit == [("grant_created", "U1"), ("grant_revoked", "api:ops")]
    assert (await submit(papp, A))["status"] == "pending"


async def test_a_grant_for_this_agent_is_for_its_token_not_its_label(papp: App) -> None:
    grant = await granted(papp, A, requested_by="shared-label")
    assert (grant["scope"], grant["scope_value"]) == ("agent", "agent-a")
    impostor = await submit(papp, B, requested_by="shared-label")  # same label, same call, another token
    assert impostor["status"] == "pending"
    relabelled = await submit(papp, A, requested_by="another label")  # same token, any label
    assert relabelled["status"] == "approved" and relabelled["decision"]["grant_id"] == grant["id"]


async def revoke_buttons(app: App, user: str) -> list[str]:
    listing = await app.slack_client.command(user=user, text="grants")
    return [b["accessory"]["value"] for b in listing.json()["blocks"]
            if b.get("accessory", {}).get("action_id") == "signoff_revoke_grant"]


async def test_in_slack_people_see_and_revoke_only_what_they_may(papp: App) -> None:
    ones = await granted(papp, A, user="U1", approvers=["U1", "U2"])
    threes = await granted(papp, B, user="U3", approvers=["U3"], params={"to": "bob@example.com", "subject": "Hi"})
    assert await revoke_buttons(papp, "U9") == []  # a workspace member who had no say
    assert await revoke_buttons(papp, "U1") == [ones["id"]]  # made it
    assert await revoke_buttons(papp, "U2") == [ones["id"]]  # approver of the request it was made on
    assert await revoke_buttons(papp, "U3") == [threes["id"]]
    assert await revoke_buttons(papp, "U5") == [threes["id"], ones["id"]]  # grant_admins, by id
    assert await revoke_buttons(papp, "U6") == [threes["id"], ones["id"]]  # grant_admins, by user group

    told = len(papp.slack.calls_to("chat.postEphemeral"))
    await papp.slack_client.block_action(user="U9", action_id="signoff_revoke_grant", value=ones["id"],
                                         block_id="grant", channel="C1")
    note = (await papp.slack.wait_for("chat.postEphemeral", count=told + 1))[-1]
    assert note.args["user"] == "U9" and "You cannot revoke grant" in note.args["text"]
    assert (await submit(papp, A))["status"] == "approved"  # still live
    assert papp.signoff is not None
    assert [e.type for e in await papp.signoff.store.audit_events(ones["id"])] == ["grant_created"]

    await papp.slack_client.block_action(user="U6", action_id="signoff_revoke_grant", value=ones["id"],
                                         block_id="grant", channel="C1")
    notes = await papp.slack.wait_for("chat.postEphemeral", count=told + 2)
    assert "Revoked grant" in notes[-1].args["text"]
    audit = [(e.type, e.actor) for e in await papp.signoff.store.audit_events(ones["id"])]
    assert audit == [("grant_created", "U1"), ("grant_revoked", "U6")]
    assert (await submit(papp, A))["status"] == "pending"

    await papp.slack_client.event({"type": "app_home_opened", "user": "U9", "channel": "D1", "tab": "home"})
    [published] = await papp.slack.wait_for("views.publish")
    assert not [b for b in published.args["view"]["blocks"]
                if b.get("accessory", {}).get("action_id") == "signoff_revoke_grant"]
