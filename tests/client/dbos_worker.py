"""A DBOS worker as a person runs it, for the DBOS tests: a script in its own folder started with this
venv's Python (no PYTHONPATH), its output in a log file, SIGKILLed and started again on one port and
one DBOS system database. Also the DBOS side the tests observe: a workflow's recorded steps."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from bench.harness import free_port
from tests.support.databases import PG_URL, empty_pg_database
from tests.support.engines import RUN_ALL, run_all
from tests.support.app import API_TOKEN, WEBHOOK_SECRET, App
from tests.support.process import LoggedProcess

READY = "worker ready"


class Worker(LoggedProcess):
    """`python SCRIPT ARGS...` in `folder`, with what a terminal that pasted the exports has."""

    def __init__(self, folder: Path, script: str, app: App, dbos_url: str, *, channel: str = "C1") -> None:
        self.folder, self.script = folder, script
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SIGNOFF_", "DBOS")) and k != "PYTHONPATH"}
        env.update(PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "/usr/bin:/bin")]),
                   SIGNOFF_URL=app.url, SIGNOFF_TOKEN=API_TOKEN, SIGNOFF_CHANNEL=channel,
                   SIGNOFF_WEBHOOK_SECRET=WEBHOOK_SECRET, WORKER_PORT=str(self.port),
                   DBOS_SYSTEM_DATABASE_URL=dbos_url)
        super().__init__([sys.executable, script], env, folder, folder / "worker.log")

    @property
    def log(self) -> Path:
        return self.folder / "worker.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/signoff/webhook"

    async def start(self, *args: str) -> None:
        """Start it and wait until it says it is ready (DBOS launched, webhooks served)."""
        before = sum(READY in line for line in self.lines())
        self.launch(*args)
        await self.until(lambda: sum(READY in line for line in self.lines()) > before, "the worker to be ready")


@pytest_asyncio.fixture(params=["sqlite", "postgresql"])
async def dbos_url(request: Any, tmp_path: Path) -> AsyncIterator[str]:
    """The worker's DBOS system database: a SQLite file; and a fresh PostgreSQL database when
    SIGNOFF_TEST_DATABASE_URL names a server (skipped, visibly, otherwise)."""
    import pytest

    if request.param == "sqlite":
        if PG_URL and not run_all():  # the same recipe on the same DBOS engine as the SQLite run's
            pytest.skip(f"DBOS on SQLite: ran in the SQLite run ({RUN_ALL}=1 runs it on this run too)")
        yield f"sqlite:///{tmp_path / 'refunds.sqlite'}"
        return
    if not PG_URL:
        pytest.skip("DBOS on PostgreSQL: runs when SIGNOFF_TEST_DATABASE_URL names a PostgreSQL database")
    async with empty_pg_database("signoff_dbos") as url:
        yield url


def _steps(dbos_url: str, workflow_id: str) -> list[str]:
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=dbos_url)
    try:
        return [s["function_name"] for s in client.list_workflow_steps(workflow_id, load_output=False)]
    finally:
        client.destroy()


async def steps(dbos_url: str, workflow_id: str) -> list[str]:
    """The names of the steps DBOS recorded for the workflow, in order ([] before it exists)."""
    try:
        return await asyncio.to_thread(_steps, dbos_url, workflow_id)
    except Exception as exc:  # no system database yet (the worker has not launched DBOS)
        if "no such table" in str(exc) or "does not exist" in str(exc):
            return []
        raise


async def recorded(dbos_url: str, workflow_id: str, step: str, timeout: float = 60.0) -> list[str]:
    """Until the workflow has recorded `step`; its steps then."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = await steps(dbos_url, workflow_id)
        if step in found:
            return found
        assert loop.time() < deadline, f"{workflow_id} never recorded {step}: {found}"
        await asyncio.sleep(0.05)  # test-side: DBOS records in another process
