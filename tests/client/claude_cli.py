"""The real Claude Code CLI (bundled in the claude-agent-sdk wheel), run offline against FakeClaudeApi.

Each run gets its own HOME and CLAUDE_CODE_TMPDIR under the test's tmp folder (sessions are kept
there, so `--resume` works across runs of one `ClaudeCli`), non-essential traffic off, and the
fake Messages API as ANTHROPIC_BASE_URL. Hooks and MCP servers the CLI starts inherit this
environment, which is how they learn SIGNOFF_URL / SIGNOFF_TOKEN.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import claude_agent_sdk
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage

from tests.fakes.claude_api import FakeClaudeApi
from tests.support.app import ROOT

CLAUDE = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
RUN_TIMEOUT = 120.0


def signoff_command() -> str:
    """How a hook or MCP config starts `signoff`: the installed console script beside this Python."""
    script = Path(sys.executable).parent / "signoff"
    return str(script) if script.exists() else f"{sys.executable} -m bot"


@dataclass
class ClaudeCli:
    fake: FakeClaudeApi
    root: Path
    env_extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.work = self.root / "work"
        self.tmp = self.root / "claude-tmp"
        self.bin = self.root / "bin"
        for folder in (self.home, self.work, self.tmp, self.bin):
            folder.mkdir(parents=True, exist_ok=True)
        (self.bin / "claude").symlink_to(CLAUDE)  # `claude` and `signoff` on PATH, as for a user

    def env(self) -> dict[str, str]:
        path = os.pathsep.join([str(self.bin), str(Path(sys.executable).parent), os.environ.get("PATH", "/usr/bin:/bin")])
        return {
            "PATH": path,
            "HOME": str(self.home),
            "ANTHROPIC_BASE_URL": self.fake.url,
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_TMPDIR": str(self.tmp),
            "PYTHONPATH": str(ROOT),
            **self.env_extra,
        }

    async def run(self, prompt: str, *args: str) -> dict[str, Any]:
        """`claude -p PROMPT --output-format json ARGS...`; its JSON result (stderr attached on failure)."""
        proc = await asyncio.create_subprocess_exec(
            str(CLAUDE), "-p", prompt, "--output-format", "json", *args, cwd=self.work, env=self.env(),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        try:
            result = json.loads(out.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise AssertionError(f"claude exited {proc.returncode} without JSON:\n{out.decode()[-3000:]}\n"
                                 f"{err.decode()[-3000:]}") from None
        result["_exit"] = proc.returncode
        result["_stderr"] = err.decode()
        return result

    async def shell(self, script: str, timeout: float = RUN_TIMEOUT) -> tuple[int, str, str]:
        """Run a README shell example with bash in the work folder: (exit code, stdout, stderr)."""
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", script, cwd=self.work, env=self.env(), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        return proc.returncode or 0, out.decode(), err.decode()


def hook_settings(*hook_args: str, matcher: str = "Write|Edit|MultiEdit|Bash|WebFetch", timeout: int = 60) -> str:
    command = " ".join([signoff_command(), "hook", "claude-code", *hook_args])
    return json.dumps({"hooks": {"PreToolUse": [{"matcher": matcher, "hooks": [
        {"type": "command", "command": command, "timeout": timeout}]}]}})


async def run_sdk(cli: ClaudeCli, prompt: str, callback: Any) -> ResultMessage:
    """One query through the real ClaudeSDKClient (its bundled CLI) with `callback` as can_use_tool."""
    options = ClaudeAgentOptions(cli_path=str(CLAUDE), cwd=str(cli.work), env=cli.env(), can_use_tool=callback,
                                 permission_mode="default")
    async with ClaudeSDKClient(options) as sdk:
        await sdk.query(prompt)
        async for received in sdk.receive_response():
            if isinstance(received, ResultMessage):
                return received
    raise AssertionError("no result")
