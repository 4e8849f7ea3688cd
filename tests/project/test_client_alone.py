"""The agent side installs alone: `pip install client/` into a fresh venv brings the `signoff` package
and command with only what they need (an HTTP client, pydantic), none of the server's dependencies,
and its Claude Code hook asks the running server and answers with the person's decision."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.app import ROOT, App
from tests.support.waits import until

AGENT = "client-alone-agent-token"
SERVER_ONLY = ("bot", "storage", "slack_bolt", "slack_sdk", "sqlalchemy", "aiosqlite", "asyncpg", "alembic",
               "anthropic", "re2", "apscheduler", "aiohttp", "prometheus_client", "jsonschema")


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv with `pip install client/` and nothing else (built once for the module)."""
    venv = tmp_path_factory.mktemp("client-venv")
    # Without a pip of its own (this one installs into it with --python): copying pip into every fresh
    # venv was a fifth of the fixture's time, and pip is not what the test is about.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                           "--disable-pip-version-check", str(ROOT / "client")], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    yield venv


def test_the_client_installs_without_any_server_dependency(client_venv: Path) -> None:
    code = ("import importlib.util as u, json; "
            f"print(json.dumps([m for m in {SERVER_ONLY!r} if u.find_spec(m) is not None]))")
    found = subprocess.run([str(client_venv / "bin" / "python"), "-c", code], capture_output=True, text=True,
                           check=True, cwd=client_venv)  # not the checkout: its bot/ must not be on the path
    assert json.loads(found.stdout) == []
    names = subprocess.run([str(client_venv / "bin" / "python"), "-c",
                            "from signoff import SignoffClient, require_approval; print(SignoffClient.__name__)"],
                           capture_output=True, text=True, check=True, cwd=client_venv)
    assert names.stdout.strip() == "SignoffClient"


def test_the_client_alone_says_the_servers_commands_need_the_server(client_venv: Path) -> None:
    done = subprocess.run([str(client_venv / "bin" / "signoff"), "serve"], capture_output=True, text=True,
                          cwd=client_venv, timeout=60)
    assert done.returncode == 2
    assert "a command of the Signoff server, which is not installed here" in done.stderr


pytestmark = pytest.mark.settings(token=AGENT, SIGNOFF_API_TOKENS=f"claude-agent:{AGENT}:agent")


async def test_the_installed_hook_asks_the_server_and_answers_the_persons_decision(client_venv: Path,
                                                                                  app: App) -> None:
    payload = {"session_id": "s-alone", "cwd": "/home/dev/acme", "permission_mode": "default",
               "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "toolu_alone_1",
               "tool_input": {"command": "rm -rf build/"}}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(SIGNOFF_URL=app.url, SIGNOFF_TOKEN=AGENT, SIGNOFF_CHANNEL="C1", SIGNOFF_APPROVERS="U1")
    proc = await asyncio.create_subprocess_exec(
        str(client_venv / "bin" / "signoff"), "hook", "claude-code", env=env, cwd=client_venv,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    answering = asyncio.create_task(proc.communicate(json.dumps(payload).encode()))
    try:
        async def asked() -> str | None:
            assert not answering.done(), "the hook answered without asking the server"
            return await _pending(app)

        # The hook's card: up to a minute on a loaded machine.
        await app.click(await until(asked, "the hook to ask the server", timeout=60), "U1")
        out, err = await asyncio.wait_for(answering, 60)
    finally:
        if proc.returncode is None:
            proc.kill()
    answer = json.loads(out)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "allow", err.decode()


async def _pending(app: App) -> str | None:
    status, body = await app.api("GET", "/api/v1/approvals?status=pending",
                                 headers={"Authorization": f"Bearer {AGENT}"})
    assert status == 200, body
    items = body["items"]
    return str(items[0]["id"]) if items else None
