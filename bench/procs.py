"""Processes and scratch databases for the benchmarks."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sqlalchemy.engine import make_url

from storage.migrate import upgrade
from bench.harness import API_TOKEN, SIGNING_SECRET, UNCAPPED, WEBHOOK_SECRET, free_port, wait_until_healthy

ROOT = Path(__file__).resolve().parent.parent


class Server:
    """A server subprocess on 127.0.0.1:`port` (Signoff or the bare Bolt app); ready when /healthz says 200."""

    def __init__(self, name: str, module_args: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [sys.executable, "-m", *module_args]
        self.env = {**os.environ, **env, "PORT": str(self.port), "SIGNOFF_HOST": "127.0.0.1",
                    "PYTHONPATH": str(ROOT)}
        self.log_path = log_dir / f"{name}-{self.port}.log"
        self.cwd = log_dir  # no stray .env is read from the repository
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, env=self.env, cwd=self.cwd, stdout=log, stderr=subprocess.STDOUT)
        await wait_until_healthy(self.proc, self.url, self.log_path)

    def cpu_seconds(self) -> float:
        """User + system CPU the process has used so far (Linux /proc; NaN elsewhere)."""
        try:
            assert self.proc is not None
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (AssertionError, OSError, ValueError, IndexError):
            return math.nan

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def signoff_server(name: str, db_url: str, slack_url: str, log_dir: Path) -> Server:
    env = {
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": slack_url,
        "DATABASE_URL": db_url,
        "SIGNOFF_API_TOKENS": API_TOKEN,
        "SIGNOFF_WEBHOOK_SECRET": WEBHOOK_SECRET,
        **UNCAPPED,
    }
    return Server(name, ["bot", "serve"], env, log_dir)


def bare_bolt_server(slack_url: str, log_dir: Path) -> Server:
    env = {"SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": slack_url}
    return Server("bare-bolt", ["bench.bare_bolt"], env, log_dir)


async def _pg_admin(admin_url: str, sql: str) -> None:
    import asyncpg

    url = make_url(admin_url.replace("postgres://", "postgresql://", 1))
    conn = await asyncpg.connect(host=url.host or "127.0.0.1", port=url.port or 5432, user=url.username,
                                 password=url.password, database=url.database or "postgres")
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@asynccontextmanager
async def scratch_database(engine: str, *, pg_url: str, workdir: Path) -> AsyncIterator[str]:
    """A freshly migrated database: a SQLite file in `workdir`, or a PostgreSQL database dropped afterwards."""
    if engine == "sqlite":
        path = workdir / f"bench-{uuid.uuid4().hex[:10]}.db"
        url = f"sqlite:///{path}"
        await upgrade(url)
        try:
            yield url
        finally:
            for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
                leftover.unlink(missing_ok=True)
        return
    name = f"signoff_bench_{uuid.uuid4().hex[:10]}"
    await _pg_admin(pg_url, f'CREATE DATABASE "{name}"')
    try:
        url = make_url(pg_url.replace("postgres://", "postgresql://", 1)).set(database=name)
        rendered = url.render_as_string(hide_password=False)
        await upgrade(rendered)
        yield rendered
    finally:
        await _pg_admin(pg_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
