"""A DBOS worker as a person runs it, for the DBOS tests: a script in its own folder started with this
venv's Python (no PYTHONPATH), its output in a log file, SIGKILLed and started again on one port and
one DBOS system database. Also the DBOS side the tests observe: a workflow's recorded steps."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from bench.harness import free_port
from tests.conftest import PG_URL, _drop_database, _pg_admin, _pg_url_for
from tests.support.app import API_TOKEN, WEBHOOK_SECRET, App

READY = "worker ready"


class Worker:
    """`python SCRIPT ARGS...` in `folder`, with what a terminal that pasted the exports has."""

    def __init__(self, folder: Path, script: str, app: App, dbos_url: str, *, channel: str = "C1") -> None:
        self.folder, self.script = folder, script
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SIGNOFF_", "DBOS")) and k != "PYTHONPATH"}
        env.update(PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "/usr/bin:/bin")]),
                   SIGNOFF_URL=app.url, SIGNOFF_TOKEN=API_TOKEN, SIGNOFF_CHANNEL=channel,
                   SIGNOFF_WEBHOOK_SECRET=WEBHOOK_SECRET, WORKER_PORT=str(self.port),
                   DBOS_SYSTEM_DATABASE_URL=dbos_url)
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def log(self) -> Path:
        return self.folder / "worker.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/signoff/webhook"

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    async def start(self, *args: str) -> None:
        """Start it and wait until it says it is ready (DBOS launched, webhooks served)."""
        before = sum(READY in line for line in self.lines())
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, self.script, *args], cwd=self.folder, env=self.env,
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.starts += 1
        await self.until(lambda: sum(READY in line for line in self.lines()) > before, "the worker to be ready")

    async def until(self, ready: Any, what: str, timeout: float = 60.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not ready():
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"the worker exited ({self.proc.returncode}) waiting for {what}:\n"
                                     + "\n".join(self.lines()[-60:]))
            if loop.time() > deadline:
                raise AssertionError(f"timed out waiting for {what}:\n" + "\n".join(self.lines()[-60:]))
            await asyncio.sleep(0.05)  # test-side: the worker is another process

    def kill(self) -> None:
        """SIGKILL: no cleanup, exactly like a crashed host."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest_asyncio.fixture(params=["sqlite", "postgresql"])
async def dbos_url(request: Any, tmp_path: Path) -> AsyncIterator[str]:
    """The worker's DBOS system database: a SQLite file; and a fresh PostgreSQL database when
    SIGNOFF_TEST_DATABASE_URL names a server (skipped, visibly, otherwise)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'refunds.sqlite'}"
        return
    if not PG_URL:
        import pytest

        pytest.skip("DBOS on PostgreSQL: runs when SIGNOFF_TEST_DATABASE_URL names a PostgreSQL database")
    name = f"signoff_dbos_{uuid.uuid4().hex[:12]}"
    await _pg_admin(f'CREATE DATABASE "{name}"')
    try:
        yield _pg_url_for(name)
    finally:
        await asyncio.to_thread(_drop_database, name)


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
