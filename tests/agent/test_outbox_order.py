"""A run's Slack messages go out in the order they were made, also when one must be retried.

(Found by tests/agent/test_crash.py under load: a thread note timed out and was put back for a
retry, and the run's later messages went out before it; that test then saw "Done" without the
warning that came first.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.sandbox import SlackEmulator
from bot.sandbox.model import FakeAnthropic, message, text, tool_use
from tests.support.outbox import settle
from tests.agent.conftest import agent_env
from tests.fakes.clock import FakeClock
from tests.support.app import App, start_app

from tests.support.waits import more_sweeps


async def waiting_request(app: App, run_id: str) -> str:
    for _ in range(400):
        _, run = await app.api("GET", f"/api/v1/runs/{run_id}?wait=5")
        waiting = [c["request_id"] for c in run["tool_calls"] if c["status"] == "waiting"]
        if waiting:
            return str(waiting[0])
    raise AssertionError(f"the run never waited for approval: {run}")


def completed_updates(slack: SlackEmulator) -> list[int]:
    """Positions of the successful updates of the run's message to its final state."""
    return [n for n, c in enumerate(slack.calls) if c.method == "chat.update" and c.ok
            and "Completed" in str(c.args.get("text"))]


async def finished(app: App, run_id: str) -> dict[str, Any]:
    for _ in range(400):
        _, run = await app.api("GET", f"/api/v1/runs/{run_id}?wait=5")
        if run["status"] == "completed":
            return dict(run)
    raise AssertionError(f"the run never completed: {run}")


async def test_a_later_message_waits_for_an_earlier_one_that_is_retried(
        db_url: str, slack: SlackEmulator, model: FakeAnthropic, tmp_path: Path) -> None:
    clock = FakeClock()  # stands still: the failed note's retry comes when the test moves time
    app = await start_app(db_url, slack, clock=clock, SIGNOFF_OUTBOX_SWEEP_SECONDS="0.05",
                          **agent_env(model, tmp_path))
    try:
        assert app.signoff is not None
        model.script(
            message(text("Emailing."), tool_use("send_email", {"to": "ops@example.com", "subject": "Hi", "body": "Hello"},
                                                id="toolu_order")),
            message(text("Sent.")),
        )
        status, run = await app.api("POST", "/api/v1/runs", json={"task": "Say hi", "channel": "C1"})
        assert status == 201, run
        request_id = await waiting_request(app, run["id"])
        slack.fail("chat.postMessage", status=500)  # the next post, the run's "Done" note: retried later
        await app.click(request_id, "U1")
        await finished(app, run["id"])
        await slack.wait_for("chat.postMessage", count=3, ok_only=False)  # root, card, the failed note
        await more_sweeps(app.url, "outbox", 5)  # the root message's last update came up meanwhile, and waited
        assert completed_updates(slack) == []

        clock.advance(minutes=10)
        await settle(app)
        done = [n for n, c in enumerate(slack.calls) if c.method == "chat.postMessage" and c.ok
                and "Done after" in str(c.args.get("text"))]
        assert len(done) == 1 and len(completed_updates(slack)) == 1
        assert done[0] < completed_updates(slack)[0]  # in the order they were made
    finally:
        await app.stop()
