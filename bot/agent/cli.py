"""`signoff run "<task>" --channel C...`: start an agent run from a shell.

The run is written to the database (the same use case as `POST /api/v1/runs`); a running
`signoff serve` posts its message in the channel and works on it. Nothing here talks to
Slack or to the model.
"""

from __future__ import annotations

import getpass

from bot.agent.app import DEFAULT_AGENT
from bot.agent.run_service import RunService
from bot.clock import SystemClock
from bot.domain.runs import NewRun
from bot.service import Service
from bot.settings import Settings, SettingsError
from storage.run_store import SqlRunStore
from storage.sql import SqlStore


async def start_run(settings: Settings, task: str, *, channel: str | None, agent: str | None) -> str:
    """Store the run; returns its id. Raises SettingsError (a missing channel, an old schema)."""
    from storage.migrate import current_revision, head_revision, upgrade

    channel = channel or settings.default_channel
    if not channel:
        raise SettingsError("--channel is required (or set SIGNOFF_DEFAULT_CHANNEL)")
    if not task.strip():
        raise SettingsError("the task must not be empty")
    store = await SqlStore.open(settings.database_url)
    try:
        if settings.is_sqlite:
            await upgrade(settings.database_url, engine=store.write_engine)
        elif await current_revision(store.engine) != head_revision():
            raise SettingsError("the database schema is not up to date: run `signoff db upgrade` first")
        runs = RunService(Service(store), SqlRunStore(store), clock=SystemClock(), agents={DEFAULT_AGENT})
        run = await runs.start(NewRun(task=task.strip(), channel=channel, agent=agent or DEFAULT_AGENT,
                                      requested_by=f"cli:{getpass.getuser()}"))
        return run.id
    finally:
        await store.close()
