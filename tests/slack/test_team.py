"""Signed Slack requests addressed to another workspace are acked and do nothing; Slack Connect's are served."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from bot.sandbox import SlackEmulator
from bot.sandbox.signed import SlackClient
from tests.support.app import SIGNING_SECRET, App, start_app


def mention(ts: str) -> dict[str, Any]:
    return {"type": "app_mention", "user": "U1", "channel": "C1", "text": "<@UBOT> what waits?", "ts": ts,
            "event_ts": ts}


async def status_of(app: App, request_id: str) -> dict[str, Any]:
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    return dict(body)


async def test_requests_for_another_workspace_are_acked_do_nothing_and_are_logged_once(
        app: App, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    req = await app.submit(approvers=["U1", "U2"])
    card = await app.card(req["id"])
    other = SlackClient(app.url, SIGNING_SECRET, team_id="T2", fake=app.slack)  # the same app, another install
    try:
        command = await other.command(user="U1", text="pending")
        assert command.status == 200 and command.text == ""  # acked, and nothing answered
        click = await other.block_action(user="U2", user_name="bob", action_id="signoff_approve", value=req["id"],
                                         block_id="decide", channel=card.channel, message_ts=card.ts)
        assert click.status == 200 and click.text == ""
        assert (await other.event(mention("1700000000.000200"))).status == 200
    finally:
        await other.close()
    # Our own workspace's requests go through as before (and show the refused ones did nothing).
    ours = await app.slack_client.command(user="U1", text="pending")
    assert ours.status == 200 and ours.text != ""
    await app.click(req["id"], "U1", user_name="alice")
    await app.slack_client.event(mention("1700000000.000300"))
    await app.slack.wait_for("chat.postEphemeral")
    body = await status_of(app, req["id"])
    # The click from the other workspace came first: had it counted, bob would have decided.
    assert body["status"] == "approved" and body["decision"]["decided_by"]["id"] == "U1", body
    assert len(app.slack.calls_to("chat.postEphemeral")) == 1
    refused = [r.getMessage() for r in caplog.records if "refused a signed Slack request" in r.getMessage()]
    assert refused == ["refused a signed Slack request for workspace T2: this bot is installed in workspace T1 "
                       "(acked, nothing done; further ones from there are not logged)"]


async def test_a_person_from_another_workspace_in_a_slack_connect_channel_is_served(app: App) -> None:
    """Slack Connect: the person's `user.team_id` is their own workspace; `team` and `authorizations` are ours."""
    req = await app.submit(approvers=["U1"])
    card = await app.card(req["id"])
    payload = {
        "type": "block_actions", "team": {"id": "T1", "domain": "fake"}, "api_app_id": "A1", "trigger_id": "1.T9.x",
        "user": {"id": "U1", "username": "alice", "name": "alice", "team_id": "T9"},
        "container": {"type": "message", "message_ts": card.ts, "channel_id": card.channel, "is_ephemeral": False},
        "channel": {"id": card.channel}, "message": {"ts": card.ts, "blocks": card.blocks}, "state": {"values": {}},
        "actions": [{"action_id": "signoff_approve", "block_id": "decide", "value": req["id"], "type": "button",
                     "action_ts": "1700000000.1"}],
    }
    assert (await app.slack_client.post_payload(payload)).status == 200
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=10")
    assert body["status"] == "approved" and body["decision"]["decided_by"]["id"] == "U1", body
    # An event in a channel another workspace owns: its `team_id` is theirs, `authorizations` names us.
    event = {"token": "t", "team_id": "T9", "api_app_id": "A1", "type": "event_callback", "event_id": "Ev9",
             "event_time": 1700000000, "event": mention("1700000000.000400"), "is_ext_shared_channel": True,
             "authorizations": [{"enterprise_id": None, "team_id": "T1", "user_id": "UBOT", "is_bot": True}]}
    sent = await app.slack_client.post_raw(json.dumps(event), content_type="application/json")
    assert sent.status == 200
    [answer] = await app.slack.wait_for("chat.postEphemeral")
    assert answer.args["user"] == "U1"


async def test_until_slack_says_which_workspace_is_ours_requests_are_refused_with_503(
        db_url: str, slack: SlackEmulator) -> None:
    slack.fail("auth.test", status=500, times=2)  # at start (served anyway, not knowing), and when first asked
    app = await start_app(db_url, slack)
    try:
        refused = await app.slack_client.command(user="U1", text="pending")
        assert refused.status == 503
        answered = await app.slack_client.command(user="U1", text="pending")  # asked again: Slack answers now
        assert answered.status == 200 and answered.text != ""
    finally:
        await app.stop()


async def test_over_socket_mode_a_click_for_another_workspace_is_acked_and_does_nothing(
        db_url: str, slack: SlackEmulator) -> None:
    app = await start_app(db_url, slack, SLACK_APP_TOKEN="xapp-test")
    try:
        req = await app.submit(approvers=["U1", "U2"])
        card = await app.card(req["id"])

        def click(user: str, name: str, team: str) -> dict[str, Any]:
            return {"type": "block_actions", "user": {"id": user, "name": name, "team_id": team}, "team": {"id": team},
                    "api_app_id": "A1", "trigger_id": f"trig-{user}",
                    "container": {"type": "message", "message_ts": card.ts, "channel_id": card.channel},
                    "channel": {"id": card.channel},
                    "actions": [{"action_id": "signoff_approve", "block_id": "decide", "type": "button",
                                 "value": req["id"], "action_ts": "1"}]}

        assert "envelope_id" in await slack.socket_mode.send("interactive", click("U2", "bob", "T2"))
        assert "envelope_id" in await slack.socket_mode.send("interactive", click("U1", "alice", "T1"))
        _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
        assert body["status"] == "approved" and body["decision"]["decided_by"] == {"id": "U1", "name": "alice"}
    finally:
        await app.stop()
