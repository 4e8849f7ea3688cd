"""`signoff run "<task>" --channel C...`: start an agent run from a shell.

The run is written to the server's database (the same use case as `POST /api/v1/runs`); a running
`signoff serve` posts its message in the channel and works on it. Nothing here talks to Slack or to
the model, so no Slack setting is read. The database must already exist and be migrated: creating a
fresh SQLite file here would store a run that no server ever sees.
"""

from __future__ import annotations

import getpass

from bot.agent.app import DEFAULT_AGENT
from bot.agent.run_service import RunService
from bot.process.clock import SystemClock
from bot.domain.runs import NewRun
from bot.domain.values import CHANNEL_ID
from bot.approvals.service import Service
from bot.process.settings import RunSettings, SettingsError
from bot.process.startup import open_database
from storage.run_store import SqlRunStore


async def start_run(settings: RunSettings, task: str, *, channel: str | None, agent: str | None) -> str:
    """Store the run; returns its id. Raises SettingsError / StartupError with one line."""
    channel = channel or settings.default_channel
    if not channel:
        raise SettingsError("--channel is required (or set SIGNOFF_DEFAULT_CHANNEL)")
    if not CHANNEL_ID.match(channel):  # what POST /api/v1/runs says of the same value
        raise SettingsError(f"--channel: {channel[:40]!r} is not a Slack channel id (like C0123ABCD)")
    if not task.strip():
        raise SettingsError("the task must not be empty")
    if not settings.anthropic_api_key:
        raise SettingsError("ANTHROPIC_API_KEY is not set: the server that works on runs needs it (set it in its "
                            "environment or .env, and here); nothing was started")
    store = await open_database(settings.database_url, migrate=False, must_exist=True)
    try:
        runs = RunService(Service(store), SqlRunStore(store), clock=SystemClock(), agents={DEFAULT_AGENT})
        run = await runs.start(NewRun(task=task.strip(), channel=channel, agent=agent or DEFAULT_AGENT,
                                      requested_by=f"cli:{getpass.getuser()}"))
        return run.id
    finally:
        await store.close()
