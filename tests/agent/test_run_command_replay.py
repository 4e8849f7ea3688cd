"""A `/signoff run` is started once, even when its stored command is replayed (bot/slack/received.py)
after a crash that came between the run's commit and the done mark of the command's row: the run's id
is Slack's trigger id's (bot.domain.runs.slack_command_key), so the replay finds the run started."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest_asyncio
import sqlalchemy as sa

from bot.sandbox import SlackEmulator
from bot.sandbox.model import FakeAnthropic, message, text
from storage.runs_schema import runs
from storage.schema import slack_received
from storage.stores import open_store
from tests.agent.conftest import agent_env
from tests.agent.helpers import AgentApp
from tests.support.app import start_app
from tests.support.waits import until


@pytest_asyncio.fixture
async def leased(db_url: str, slack: SlackEmulator, model: FakeAnthropic, tmp_path: Path) -> AsyncIterator[AgentApp]:
    """The agent app with a short lease on stored Slack inputs: a row left unmarked is replayed in a second."""
    running = await start_app(db_url, slack, **agent_env(model, tmp_path, SIGNOFF_SLACK_INBOX_LEASE_SECONDS="1"))
    try:
        yield AgentApp(running, model, tmp_path)
    finally:
        await running.stop()


async def _rows(db_url: str) -> tuple[list[sa.Row[tuple[str]]], list[bool]]:
    """(the runs stored, whether each stored Slack input is marked done)."""
    store = await open_store(db_url)
    try:
        async with store.engine.connect() as conn:
            stored = list((await conn.execute(sa.select(runs.c.id))).all())
            done = [r.done_at is not None for r in (await conn.execute(sa.select(slack_received))).all()]
        return stored, done
    finally:
        await store.close()


async def test_a_run_command_replayed_after_its_run_committed_starts_no_second_run(
        leased: AgentApp, db_url: str) -> None:
    leased.model.script(message(text("The workspace is empty.")), message(text("Again.")))
    answer = await leased.app.slack_client.command(user="U1", user_name="alice", text="run check the workspace",
                                                   channel="C1", trigger_id="1337.42.replayme")
    assert answer.status == 200 and "Starting an agent run" in answer.json()["text"]
    [posted] = await leased.slack.wait_for("chat.postMessage")
    run_id = posted.args["metadata"]["event_payload"]["run_id"]
    await leased.wait_status(run_id, "completed", "failed", timeout=120)

    async def all_done() -> bool:
        _, done = await _rows(db_url)
        return bool(done) and all(done)

    await until(all_done, "the command's row marked done", timeout=120)
    # As if the process had died after the run's commit and before the row's done mark: the row is
    # unmarked and its lease has run out, so the inbox replays the command through the listeners.
    store = await open_store(db_url)
    try:
        async with store.unit() as unit:
            await unit.conn.execute(slack_received.update().values(
                done_at=None, lease_until=datetime.now(UTC) - timedelta(seconds=5)))
    finally:
        await store.close()
    assert leased.app.signoff is not None
    replayed = leased.app.signoff.inbox.replayed
    await until(lambda: _replayed(leased, replayed), "the command replayed", timeout=120)
    await until(all_done, "the replayed row marked done", timeout=120)
    stored, _ = await _rows(db_url)
    assert [r.id for r in stored] == [run_id]
    roots = [c for c in leased.slack.calls_to("chat.postMessage")
             if "run_id" in json.dumps(c.args.get("metadata")) and not c.args.get("thread_ts")]
    assert len(roots) == 1  # one run's message in the channel
    assert not leased.slack.ephemerals  # nobody told the run could not be started
    assert len(leased.model.requests) == 1  # the model was asked for one run only


async def _replayed(leased: AgentApp, before: int) -> bool:
    assert leased.app.signoff is not None
    return leased.app.signoff.inbox.replayed > before
