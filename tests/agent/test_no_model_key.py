"""Without ANTHROPIC_API_KEY nothing can drive a run: every way of starting one says so at once,
and nothing is stored (no run left `running` with no message, forever)."""

from __future__ import annotations

from bot.sandbox import SlackEmulator
from tests.support.app import start_app


async def test_runs_are_refused_without_a_model_key(db_url: str, slack: SlackEmulator) -> None:
    app = await start_app(db_url, slack)  # no ANTHROPIC_API_KEY
    try:
        status, body = await app.api("POST", "/api/v1/runs", json={"task": "tidy up", "channel": "C1"})
        assert status == 409
        assert body == {"error": {"code": "runs_unavailable", "message": (
            "this server cannot run agents: ANTHROPIC_API_KEY is not set; set it (environment or .env) and "
            "restart `signoff serve`")}}
        answer = await app.slack_client.command(user="U1", text="run tidy up", channel="C1")
        assert answer.status == 200 and answer.json() == {
            "text": "Agent runs are off on this Signoff server: ANTHROPIC_API_KEY is not set. Ask whoever runs it "
                    "to set the key and restart it. Nothing was started.",
            "response_type": "ephemeral"}
        # A bad body is still a 400 naming the field, before the key is even considered.
        status, bad = await app.api("POST", "/api/v1/runs", json={"task": "x", "channel": "general"})
        assert status == 400 and bad["error"]["details"][0]["field"] == "channel"
        assert app.signoff is not None
        assert not slack.calls_to("chat.postMessage")
        async with app.signoff.store.engine.connect() as conn:
            assert (await conn.exec_driver_sql("SELECT count(*) FROM runs")).scalar() == 0
    finally:
        await app.stop()
