"""Socket Mode while Slack cannot be reached: the HTTP port (the agent API) is open anyway, one WARNING
is logged, and Slack's requests flow once the connection is made."""

from __future__ import annotations

import logging

import pytest

from bot.sandbox import SlackEmulator
from tests.support.app import start_app


async def test_http_serves_while_socket_mode_retries(db_url: str, slack: SlackEmulator,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    slack.fail("apps.connections.open", status=503, times=2)
    app = await start_app(db_url, slack, SLACK_APP_TOKEN="xapp-test")
    try:
        req = await app.submit()  # the agent API answers while the socket is not connected
        await app.card(req["id"])
        await slack.socket_mode.connected.wait()
        ack = await slack.socket_mode.send("events_api", {
            "type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": "Ev1",
            "event": {"type": "app_home_opened", "user": "U1", "tab": "home", "channel": "DU1"}})
        assert "envelope_id" in ack
        await slack.wait_for("views.publish")
        noted = [(r.levelname, r.getMessage()) for r in caplog.records
                 if r.levelno >= logging.WARNING or "Socket Mode" in r.getMessage()]
        assert noted == [("WARNING", "Socket Mode: cannot connect to Slack (HTTP 503); retrying"),
                         ("INFO", "Socket Mode connected")]
        assert not any(r.exc_info for r in caplog.records)
    finally:
        await app.stop()


async def test_an_app_token_refused_mid_run_is_one_error_not_a_traceback_a_try(
        db_url: str, slack: SlackEmulator, caplog: pytest.LogCaptureFixture) -> None:
    # (At start-up `signoff serve` refuses a bad app token with one line: tests/process/test_startup.py.)
    app = await start_app(db_url, slack, SLACK_APP_TOKEN="xapp-test")
    try:
        await slack.socket_mode.connected.wait()
        opened = len(slack.calls_to("apps.connections.open", ok_only=False))
        slack.socket_mode.app_token = "xapp-revoked"  # revoked while connected; then the connection drops
        await slack.socket_mode.close()
        req = await app.submit()
        await app.card(req["id"])  # the rest of Signoff works
        refused = await slack.wait_for("apps.connections.open", count=opened + 2, timeout=30, ok_only=False)
        assert [c.response.get("error") for c in refused[opened:]][:2] == ["invalid_auth"] * 2  # it keeps trying
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert errors == ["Socket Mode: Slack refused SLACK_APP_TOKEN (invalid_auth): create an app-level token "
                          "with connections:write, set SLACK_APP_TOKEN and restart; Slack's requests do not reach "
                          "this process until then"]
        assert not any(r.exc_info for r in caplog.records)
    finally:
        await app.stop()
