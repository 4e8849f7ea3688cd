"""Starting a run from Slack (`/signoff run <task>`) and from a shell (`signoff run`)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.agent.conftest import agent_env
from tests.agent.helpers import AgentApp
from tests.support.outbox import finished
from bot.sandbox.model import FakeAnthropic, message, text
from bot.sandbox import SlackEmulator
from tests.support.app import ROOT, app_env, start_app


async def test_slash_command_starts_a_run_in_the_channel(agent: AgentApp) -> None:
    agent.model.script(message(text("The workspace is empty.")))
    response = await agent.app.slack_client.command(user="U1", user_name="alice", text="run  check the workspace",
                                                     channel="C1")
    assert response.status == 200 and "Starting an agent run" in response.json()["text"]
    [posted] = await agent.slack.wait_for("chat.postMessage")
    assert posted.args["channel"] == "C1" and "check the workspace" in json.dumps(posted.args["blocks"])
    run_id = posted.args["metadata"]["event_payload"]["run_id"]
    done = await agent.wait_status(run_id, "completed", "failed")
    assert done["status"] == "completed" and done["requested_by"] == "U1" and done["task"] == "check the workspace"
    assert agent.model.requests[0]["messages"][0]["content"][0]["text"] == "check the workspace"


async def test_slash_command_without_a_task_explains_and_help_still_works(agent: AgentApp) -> None:
    usage = await agent.app.slack_client.command(user="U1", text="run", channel="C1")
    assert "Usage: `/signoff run" in usage.json()["text"]
    helped = await agent.app.slack_client.command(user="U1", text="help", channel="C1")
    assert helped.status == 200 and "Signoff" in helped.json()["text"]
    await finished(agent.app)  # what the commands' listeners would post has gone out by now
    assert not agent.slack.calls_to("chat.postMessage")


async def test_cli_starts_a_run_that_the_server_picks_up(
    db_url: str, slack: SlackEmulator, model: FakeAnthropic, tmp_path: Path
) -> None:
    app = await start_app(db_url, slack, **agent_env(model, tmp_path, SIGNOFF_OUTBOX_SWEEP_SECONDS="0.1"))
    try:
        agent = AgentApp(app, model, tmp_path)
        model.script(message(text("Nothing to do.")))
        env = {**os.environ, **app_env(db_url, slack), "ANTHROPIC_API_KEY": "test-key", "PYTHONPATH": str(ROOT)}
        done = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "bot", "run", "say hello",
                                                        "--channel", "C1"], env=env, cwd=tmp_path,
                                       capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        run_id = done.stdout.split()[2].rstrip(";")
        finished = await agent.wait_status(run_id, "completed", "failed")
        assert finished["status"] == "completed" and finished["requested_by"].startswith("cli:")
        bad = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "bot", "run", "x", "--agent", "nope",
                                                       "--channel", "C1"], env=env, cwd=tmp_path,
                                      capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and "no agent named 'nope'" in bad.stderr
    finally:
        await app.stop()


async def test_the_task_is_what_the_person_typed_not_slacks_escaped_form(agent: AgentApp) -> None:
    agent.model.script(message(text("Done.")))
    response = await agent.app.slack_client.command(
        user="U1", text="run email <@U2|bob> about R&amp;D &lt;urgent&gt; in <#C9|ops>", channel="C1")
    assert response.status == 200
    [posted] = await agent.slack.wait_for("chat.postMessage")
    run_id = posted.args["metadata"]["event_payload"]["run_id"]
    done = await agent.wait_status(run_id, "completed", "failed")
    assert done["task"] == "email @bob about R&D <urgent> in #ops", done
    assert agent.model.requests[0]["messages"][0]["content"][0]["text"] == done["task"]
