"""With SLACK_APP_TOKEN set, Signoff takes Slack's requests over Socket Mode instead of HTTP."""

from __future__ import annotations

from bot.sandbox import SlackEmulator
from tests.support.app import start_app


async def test_socket_mode_click_is_acked_and_decides(db_url: str, slack: SlackEmulator) -> None:
    app = await start_app(db_url, slack, SLACK_APP_TOKEN="xapp-test")
    try:
        # No HTTP endpoint for Slack in Socket Mode: nothing unverified is exposed.
        status, _ = await app.api("POST", "/slack/events", data="payload=%7B%7D", auth=False)
        assert status == 404
        req = await app.submit()
        card = await app.card(req["id"])
        ack = await slack.socket_mode.send("interactive", {
            "type": "block_actions", "user": {"id": "U1", "name": "alice"}, "team": {"id": "T1"},
            "api_app_id": "A1", "trigger_id": "trig-1",
            "container": {"type": "message", "message_ts": card.ts, "channel_id": card.channel},
            "channel": {"id": card.channel},
            "actions": [{"action_id": "signoff_approve", "block_id": "decide", "type": "button",
                         "value": req["id"], "action_ts": "1"}],
        })
        assert "envelope_id" in ack
        _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
        assert body["status"] == "approved" and body["decision"]["decided_by"] == {"id": "U1", "name": "alice"}
        assert slack.calls_to("apps.connections.open", ok_only=True)
    finally:
        await app.stop()


def test_socket_mode_needs_an_app_level_token() -> None:
    from bot.process.settings import Settings, SettingsError

    env = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xoxb-wrong"}
    try:
        Settings.from_env(env, dotenv=None)
    except SettingsError as exc:
        assert "SLACK_APP_TOKEN" in str(exc) and "\n" not in str(exc)
    else:
        raise AssertionError("a bot token given as SLACK_APP_TOKEN was accepted")
    # A signing secret is not needed in Socket Mode.
    assert Settings.from_env({**env, "SLACK_APP_TOKEN": "xapp-1"}, dotenv=None).socket_mode
