"""Running the `signoff` command as a person would: a subprocess, its exit code, what it printed."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.app import ROOT

# Real-looking values, so that no placeholder note is printed unless a test wants one.
BOT_TOKEN = "xoxb-test"
SIGNING_SECRET = "test-signing-secret"
API_TOKEN = "test-api-token-1"


@dataclass
class Done:
    code: int
    stdout: str
    stderr: str

    @property
    def plain(self) -> list[str]:
        """stderr lines that are not JSON log events (what the command itself printed)."""
        return [line for line in self.stderr.splitlines() if not line.startswith("{")]

    def events(self, level: str | None = None) -> list[dict[str, Any]]:
        found = [json.loads(line) for line in self.stderr.splitlines() if line.startswith("{")]
        return [e for e in found if level is None or e["level"] == level]


def clean_env(**env: str) -> dict[str, str]:
    """The test process's environment without any Slack/Signoff/database setting, plus `env`."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("SLACK_", "SIGNOFF_", "ANTHROPIC_")) and k not in ("DATABASE_URL", "PORT", "DYNO")}
    return {**base, "PYTHONPATH": str(ROOT), **env}


async def signoff(*args: str, env: dict[str, str], cwd: Path, timeout: float = 60) -> Done:
    """Run `signoff args...` to its end."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot", *args, env=env, cwd=cwd,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        raise AssertionError(f"signoff {' '.join(args)} did not end:\n{err.decode()[-3000:]}") from None
    assert proc.returncode is not None
    return Done(proc.returncode, out.decode(), err.decode())


def assert_one_line(done: Done, line: str, *, code: int = 2) -> None:
    """The command failed with exactly `line` (and log events only), no traceback, no leaked session."""
    assert done.code == code, done.stderr
    assert done.plain == [line], done.stderr
    for bad in ("Traceback", "Unclosed client session", "Unclosed connector", "scheduler"):
        assert bad not in done.stderr, done.stderr
