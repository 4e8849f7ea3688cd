"""Programs the tests start as processes: `signoff serve` (`ServerProcess`), and any other program a
person would start in a terminal (`LoggedProcess`: a DBOS worker, `signoff serve` with a bare env).

Each writes its stdout and stderr to a log file the tests read line by line; `kill` is SIGKILL (a
crashed host: no cleanup, no goodbye), `stop` a SIGTERM that escalates to SIGKILL after 10 s.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from bench.harness import free_port, wait_until_healthy
from bot.sandbox import SlackEmulator
from tests.support.app import ROOT, app_env


class LoggedProcess:
    """`argv` started in `cwd` with exactly `env`; its output appended to `log`."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, log: Path | None = None) -> None:
        self.argv, self.env, self.cwd = argv, env, cwd
        self.log_path = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def launch(self, *args: str) -> None:
        """Start it (again, after a kill: the log goes on), with `args` after `argv`."""
        assert self.log_path is not None, "no log file yet"
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen([*self.argv, *args], cwd=self.cwd, env=self.env, stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.starts += 1

    def lines(self) -> list[str]:
        """Everything it has written so far, a line each."""
        return self.log_path.read_text().splitlines() if self.log_path and self.log_path.exists() else []

    def exited(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    async def until(self, ready: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
        """Until `ready()`; fails, with the log's tail, if it takes `timeout` or the process exits first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not ready():
            if self.exited():
                assert self.proc is not None
                raise AssertionError(f"{self.argv[-1]} exited ({self.proc.returncode}) waiting for {what}:\n"
                                     + "\n".join(self.lines()[-60:]))
            if loop.time() > deadline:
                raise AssertionError(f"timed out waiting for {what}:\n" + "\n".join(self.lines()[-60:]))
            await asyncio.sleep(0.02)  # test-side: the program is another process

    async def line(self, text: str, timeout: float = 30.0) -> str:
        """The first line containing `text`, once it is written."""
        def found() -> str | None:
            return next((line for line in self.lines() if text in line), None)

        await self.until(lambda: found() is not None, f"a line with {text!r}", timeout)
        return found() or ""

    def kill(self) -> None:
        """SIGKILL: no cleanup, no goodbye, exactly like a crashed host."""
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

    async def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM, as an operator's Ctrl-C or a platform's shutdown; its exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return await asyncio.to_thread(self.proc.wait, timeout)

    async def __aenter__(self) -> LoggedProcess:
        self.launch()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.kill()


class ServerProcess(LoggedProcess):
    """`python -m bot serve` in a subprocess, for kill -9 and multi-process tests: the harness's
    settings (`app_env`) on a free port, `env` over them; `start` returns once /health answers."""

    def __init__(self, db_url: str, slack: SlackEmulator, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        super().__init__([sys.executable, "-m", "bot", "serve"],
                         {**os.environ, **app_env(db_url, slack, **env), "PORT": str(self.port),
                          "SIGNOFF_HOST": "127.0.0.1", "PYTHONPATH": str(ROOT)}, ROOT)

    async def start(self, log_dir: Path) -> None:
        self.cwd, self.log_path = log_dir, log_dir / f"server-{self.port}.log"
        self.launch()
        assert self.proc is not None
        await wait_until_healthy(self.proc, self.url, self.log_path)
