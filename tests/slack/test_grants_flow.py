"""Remembered grants end to end (HTTP + signed Slack requests): "Approve & remember" on a card,
the next matching request approved without a card (`via: grant`), one just outside the match
still asks, and a revoked grant stops matching at once. Delegation: allowed and refused paths."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.sandbox import SlackEmulator
from bot.sandbox.signed import checkboxes, radio, static_select
from bot.sandbox.signed import plain_input
from tests.support.app import App, approval_body
from tests.support.app import submit_tool

POLICY = """\
tiers:
  critical: {approvers: [U1, U2], confirm: DELETE}
rules:
  - name: drops-are-critical
    tool: drop_table
    tier: critical
"""

MAIL = {"to": "ann@example.com", "subject": "Your refund", "body": "Sent."}


pytestmark = pytest.mark.policy(POLICY)


async def submit(app: App, params: dict[str, Any], name: str = "send_email", **kw: Any) -> dict[str, Any]:
    return await submit_tool(app, name, params, **kw)


def buttons(message: Any) -> list[str]:
    return [e["action_id"] for b in message.blocks if b["type"] == "actions" for e in b["elements"]]


async def remember(app: App, request_id: str, user: str, *, widen: list[str], scope: str, duration: str) -> Any:
    await app.click(request_id, user, action="signoff_remember")
    opened = await app.slack.wait_for("views.open")
    view = opened[-1].args["view"]
    assert view["callback_id"] == "signoff_remember_view"
    values = {"generalise": {"generalise": checkboxes(widen)}, "scope": {"scope": radio(scope)},
              "duration": {"duration": static_select(duration)}}
    return await app.slack_client.view_submission(user=user, user_name="alice", callback_id="signoff_remember_view",
                                                  private_metadata=view["private_metadata"], values=values)


async def test_remember_then_auto_approve_then_revoke(papp: App) -> None:
    first = await submit(papp, MAIL)
    card = await papp.card(first["id"])
    assert buttons(card)[:2] == ["signoff_approve", "signoff_remember"]
    resp = await remember(papp, first["id"], "U1", widen=["to:domain"], scope="everyone", duration="1d")
    assert resp.status == 200 and resp.text in ("", "{}")
    _, decided = await papp.api("GET", f"/api/v1/approvals/{first['id']}?wait=5")
    assert decided["status"] == "approved" and decided["decision"]["decided_by"]["id"] == "U1"
    [note] = await papp.slack.wait_for("chat.postEphemeral")
    assert "remembered as grant" in note.args["text"]
    _, grants = await papp.api("GET", "/api/v1/grants")
    [grant] = grants["items"]
    assert grant["match"] == {"to": {"op": "glob", "value": "*@example.com"},
                              "subject": {"op": "eq", "value": "Your refund"}, "body": {"op": "eq", "value": "Sent."}}
    assert (grant["scope"], grant["created_by"], grant["request_id"]) == ("everyone", "U1", first["id"])
    assert grant["expires_at"] is not None

    # The second matching request (another address at the same domain) is approved without a card.
    posts_before = len(papp.slack.calls_to("chat.postMessage"))
    second = await submit(papp, {**MAIL, "to": "bob@EXAMPLE.com"})
    assert second["status"] == "approved" and second["card"] is None
    assert (second["decision"]["via"], second["decision"]["grant_id"]) == ("grant", grant["id"])
    assert second["policy"]["grant_id"] == grant["id"]

    # Just outside the match: another domain, another subject, one more parameter: each still asks.
    for params in ({**MAIL, "to": "ann@example.org"}, {**MAIL, "subject": "Your refund!"}, {**MAIL, "cc": "x"}):
        outside = await submit(papp, params)
        assert outside["status"] == "pending", params
        await papp.card(outside["id"])
    assert len(papp.slack.calls_to("chat.postMessage")) == posts_before + 3  # no card for `second`

    # Revoke from `/signoff grants`: the very next request asks.
    listing = await papp.slack_client.command(user="U2", text="grants")
    blocks = listing.json()["blocks"]
    revoke = [b["accessory"] for b in blocks if b.get("accessory", {}).get("action_id") == "signoff_revoke_grant"]
    assert [r["value"] for r in revoke] == [grant["id"]]
    await papp.slack_client.block_action(user="U2", action_id="signoff_revoke_grant", value=grant["id"],
                                         block_id="grant", channel="C1")
    notes = await papp.slack.wait_for("chat.postEphemeral", count=2)
    assert "Revoked grant" in notes[-1].args["text"]
    third = await submit(papp, {**MAIL, "to": "bob@example.com"})
    assert third["status"] == "pending"
    _, grants = await papp.api("GET", "/api/v1/grants")
    assert grants["items"] == []
    assert papp.signoff is not None
    audit = [e.type for e in await papp.signoff.store.audit_events(grant["id"])]
    assert audit == ["grant_created", "grant_revoked"]


async def test_channel_scope_and_exact_match(papp: App, slack: SlackEmulator) -> None:
    slack.add_channel("C2", "other")
    first = await submit(papp, MAIL)
    await remember(papp, first["id"], "U1", widen=[], scope="channel", duration="1h")
    await papp.slack.wait_for("chat.postEphemeral")  # told once the grant is stored
    _, grants = await papp.api("GET", "/api/v1/grants")
    assert [g["scope_value"] for g in grants["items"]] == ["C1"]
    same = await submit(papp, MAIL)
    assert same["status"] == "approved" and same["decision"]["via"] == "grant"
    elsewhere = await submit(papp, MAIL, channel="C2")
    assert elsewhere["status"] == "pending"
    other_address = await submit(papp, {**MAIL, "to": "bob@example.com"})  # exact match only
    assert other_address["status"] == "pending"


async def test_critical_cannot_be_remembered_and_grants_never_apply(papp: App) -> None:
    drop = await submit(papp, {"table": "orders"}, name="drop_table")
    assert drop["risk"] == "critical"
    assert drop["confirm"] == "DELETE"  # the critical tier's typed confirmation applies
    card = await papp.card(drop["id"])
    assert "signoff_remember" not in buttons(card)
    await papp.click(drop["id"], "U1", action="signoff_remember")
    [note] = await papp.slack.wait_for("chat.postEphemeral")
    assert "cannot be remembered" in note.args["text"]
    await papp.click(drop["id"], "U1")  # Approve asks to type the confirmation first
    [opened] = await papp.slack.wait_for("views.open")
    assert opened.args["view"]["callback_id"] == "signoff_confirm"
    response = await papp.slack_client.view_submission(
        user="U1", user_name="alice", callback_id="signoff_confirm",
        private_metadata=opened.args["view"]["private_metadata"],
        values={"confirm": {"typed": plain_input("DELETE")}},
    )
    assert response.status == 200
    _, decided = await papp.api("GET", f"/api/v1/approvals/{drop['id']}?wait=5")
    assert decided["status"] == "approved"
    again = await submit(papp, {"table": "orders"}, name="drop_table")
    assert again["status"] == "pending"  # and evaluation never applies a grant to critical (tests/policy)


async def test_grants_api_lists_and_an_admin_token_revokes(papp: App) -> None:
    origin = await submit(papp, {"text": "hi"}, name="post")
    await remember(papp, origin["id"], "U1", widen=[], scope="everyone", duration="forever")
    await papp.api("GET", f"/api/v1/approvals/{origin['id']}?wait=5")  # approved with the grant, in one write
    _, grants = await papp.api("GET", "/api/v1/grants")  # the harness's token is an admin token
    [grant] = grants["items"]
    assert (grant["created_by"], grant["request_id"], grant["expires_at"]) == ("U1", origin["id"], None)
    assert (await submit(papp, {"text": "hi"}, name="post"))["status"] == "approved"
    status, err = await papp.api("POST", "/api/v1/grants", json={**grant, "created_by": "U1"})
    assert status == 405 and "only by a person in Slack" in err["error"]["message"]
    status, err = await papp.api("POST", f"/api/v1/grants/{grant['id']}/revoke", json={"by": "U2"})
    assert status == 400 and err["error"]["details"][0]["field"] == "by" and "api:token-1" in err["error"]["message"]
    status, revoked = await papp.api("POST", f"/api/v1/grants/{grant['id']}/revoke")
    assert status == 200 and revoked["revoked_by"] == "api:token-1"
    assert (await submit(papp, {"text": "hi"}, name="post"))["status"] == "pending"
    status, _ = await papp.api("POST", "/api/v1/grants/grt_nope/revoke")
    assert status == 404


# -- delegation ----------------------------------------------------------------------------------


async def test_away_delegates_until_back(papp: App) -> None:
    away = await papp.slack_client.command(user="U1", text="away until 2099-12-24 to <@U3|carol>")
    assert "also go to <@U3>" in away.json()["text"]
    delegated = await submit(papp, MAIL, approvers=["U1"])
    assert delegated["approvers"] == ["U1", "U3"]
    assert delegated["delegations"] == [{"user": "U1", "delegate": "U3", "until": "2099-12-24T00:00:00Z",
                                         "added": True}]
    card = await papp.card(delegated["id"])
    assert any("<@U1> is away" in json.dumps(b) and "<@U3> may decide" in json.dumps(b) for b in card.blocks)
    await papp.click(delegated["id"], "U3")
    _, decided = await papp.api("GET", f"/api/v1/approvals/{delegated['id']}?wait=5")
    assert decided["status"] == "approved" and decided["decision"]["decided_by"]["id"] == "U3"

    pending = await submit(papp, MAIL, approvers=["U1"])
    back = await papp.slack_client.command(user="U1", text="back")
    assert "Welcome back" in back.json()["text"]
    # Returning ends it: the delegate can no longer decide the request made while away...
    await papp.click(pending["id"], "U3")
    [refused] = await papp.slack.wait_for("chat.postEphemeral")
    assert "not one of the approvers" in refused.args["text"]
    # ...and new requests go to U1 only.
    after = await submit(papp, MAIL, approvers=["U1"])
    assert after["approvers"] == ["U1"] and "delegations" not in after
    await papp.click(after["id"], "U3")
    await papp.slack.wait_for("chat.postEphemeral", count=2)
    _, still = await papp.api("GET", f"/api/v1/approvals/{after['id']}")
    assert still["status"] == "pending"


async def test_away_until_a_day_means_that_day_in_the_persons_own_time_zone(papp: App) -> None:
    papp.slack.add_user("U7", "nina", tz="America/New_York")
    away = await papp.slack_client.command(user="U7", text="away until 2099-12-24 to <@U3|carol>")
    assert "also go to <@U3>" in away.json()["text"] and "2099-12-24T05:00:00Z" in away.json()["text"]
    delegated = await submit(papp, MAIL, approvers=["U7"])
    assert delegated["delegations"][0]["until"] == "2099-12-24T05:00:00Z"  # midnight in New York
    papp.slack.add_user("U9", "omar", tz="America/New_York")
    await papp.slack_client.command(user="U9", text="away  until\t2099-12-24 to <@U3|carol>")  # odd spacing too
    assert (await submit(papp, MAIL, approvers=["U9"]))["delegations"][0]["until"] == "2099-12-24T05:00:00Z"
    # Someone Slack cannot tell us about (users.info fails) is away until midnight UTC.
    await papp.slack_client.command(user="U8", text="away until 2099-12-24 to <@U3|carol>")
    assert (await submit(papp, MAIL, approvers=["U8"]))["delegations"][0]["until"] == "2099-12-24T00:00:00Z"


async def test_away_refusals(papp: App) -> None:
    past = await papp.slack_client.command(user="U1", text="away until 2001-01-01 to <@U3>")
    assert "not in the future" in past.json()["text"]
    name_only = await papp.slack_client.command(user="U1", text="away until 2099-01-01 to @bob")
    assert "cannot tell who @bob is" in name_only.json()["text"]
    self_ = await papp.slack_client.command(user="U1", text="away to U1")
    assert "yourself" in self_.json()["text"]
    usage = await papp.slack_client.command(user="U1", text="away")
    assert "Usage" in usage.json()["text"]
    assert (await submit(papp, MAIL, approvers=["U1"]))["approvers"] == ["U1"]
    not_away = await papp.slack_client.command(user="U1", text="back")
    assert "were not away" in not_away.json()["text"]


async def test_away_without_a_policy_file(app: App) -> None:
    await app.slack_client.command(user="U2", text="away to U3")
    body = approval_body(approvers=["U2"])
    _, asked = await app.api("POST", "/api/v1/approvals", json=body)
    assert asked["approvers"] == ["U2", "U3"] and asked["status"] == "pending"


async def test_app_home_lists_grants_with_revoke_and_the_away_control(papp: App) -> None:
    origin = await submit(papp, {"text": "hi"}, name="post")  # U1 and U2 are its approvers
    await remember(papp, origin["id"], "U2", widen=[], scope="everyone", duration="1d")
    await papp.api("GET", f"/api/v1/approvals/{origin['id']}?wait=5")  # approved with the grant, in one write
    _, listed = await papp.api("GET", "/api/v1/grants")
    [grant] = listed["items"]
    await papp.slack_client.event({"type": "app_home_opened", "user": "U1", "channel": "D1", "tab": "home"})
    published = (await papp.slack.wait_for("views.publish"))[-1]
    blocks = published.args["view"]["blocks"]
    assert len(blocks) <= 100
    revoke = [b["accessory"]["value"] for b in blocks if b.get("accessory", {}).get("action_id") == "signoff_revoke_grant"]
    assert revoke == [grant["id"]]
    assert any(b.get("accessory", {}).get("action_id") == "signoff_away" for b in blocks)
    posts = len(papp.slack.calls_to("chat.postMessage"))
    await papp.slack_client.block_action(user="U1", action_id="signoff_revoke_grant", value=grant["id"],
                                         block_id="grant", view_id="VHOME")
    told = await papp.slack.wait_for("chat.postMessage", count=posts + 1)  # a DM: no channel in App Home
    assert told[-1].args["channel"] == "U1" and "Revoked grant" in told[-1].args["text"]
    _, grants = await papp.api("GET", "/api/v1/grants")
    assert grants["items"] == []
    assert (await submit(papp, {"text": "hi"}, name="post"))["status"] == "pending"


async def test_remember_after_someone_else_decided_makes_no_grant(papp: App) -> None:
    first = await submit(papp, MAIL)
    await papp.click(first["id"], "U1", action="signoff_remember")
    [opened] = await papp.slack.wait_for("views.open")
    await papp.click(first["id"], "U2")  # bob approves while alice fills in the form
    _, decided = await papp.api("GET", f"/api/v1/approvals/{first['id']}?wait=5")
    assert decided["decision"]["decided_by"]["id"] == "U2"
    values = {"scope": {"scope": radio("everyone")}, "duration": {"duration": static_select("1d")}}
    resp = await papp.slack_client.view_submission(user="U1", callback_id="signoff_remember_view",
                                                  private_metadata=opened.args["view"]["private_metadata"],
                                                  values=values)
    answer = resp.json()
    assert answer["response_action"] == "errors" and "Already approved by @U2" in answer["errors"]["scope"]
    _, grants = await papp.api("GET", "/api/v1/grants")
    assert grants["items"] == []
    assert (await submit(papp, MAIL))["status"] == "pending"
