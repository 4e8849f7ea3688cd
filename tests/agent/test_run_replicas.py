"""Two `signoff serve` processes on one database: a long-poll on a run waits on one process while
the other drives the run to its end."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.agent.conftest import agent_env
from tests.agent.test_crash import Server
from bot.sandbox.model import FakeAnthropic, message, text, tool_use
from bot.sandbox import SlackEmulator
from tests.support.waits import long_poll_registered


async def test_a_long_poll_on_a_run_returns_when_another_process_ends_it(
    db_url: str, slack: SlackEmulator, model: FakeAnthropic, tmp_path: Path
) -> None:
    model.script(
        message(text("Emailing ops."), tool_use("send_email", {"to": "ops@example.com", "subject": "Deploy",
                                                               "body": "Deploying now."}, id="toolu_email")),
        message(text("Sent.")),
    )
    env = agent_env(model, tmp_path)
    driver = await Server.start(db_url, slack, env, tmp_path)
    # The waiting process never sweeps for runs here, so it cannot finish the run itself: only a
    # wake-up from the driver's commit can end its long-poll early.
    watcher = await Server.start(db_url, slack, {**env, "SIGNOFF_RUN_SWEEP_SECONDS": "3600"}, tmp_path)
    try:
        run = await driver.post("/api/v1/runs", {"task": "Tell ops we deploy", "channel": "C1"})
        request_id, card = await driver.waiting_card(run["id"], "toolu_email")
        waiting = asyncio.create_task(watcher.get(f"/api/v1/runs/{run['id']}?wait=60"))
        await long_poll_registered(watcher.proc.url)  # the long-poll reached the other process and registered
        assert not waiting.done()
        await driver.approve(request_id, card)  # the driver's runner resumes and finishes the run
        ended = await asyncio.wait_for(waiting, 20)  # woken by the end, not by its 60 s wait running out
        assert ended["status"] == "completed"
        assert [c["status"] for c in ended["tool_calls"]] == ["finished"]
    finally:
        await driver.close()
        await watcher.close()
