"""What the model is told when a tool times out or breaks (issue 9, defect 12): a stopped call that
is not safe to repeat has an unknown outcome; an exception's text (SQL, parameters) never leaks."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.agent.messages import run_tool
from bot.agent.tools import ToolContext, Toolset


def toolset() -> Toolset:
    tools = Toolset()

    @tools.tool(timeout=0.05)
    async def deploy(ctx: ToolContext) -> str:
        """Trigger a deploy (not safe to repeat)."""
        await asyncio.sleep(30)  # deliberate: a tool that overruns its 0.05 s timeout
        return "deployed"

    @tools.tool(read_only=True, timeout=0.05)
    async def look(ctx: ToolContext) -> str:
        """Read something (safe to repeat)."""
        await asyncio.sleep(30)  # deliberate: a tool that overruns its 0.05 s timeout
        return "looked"

    @tools.tool(read_only=True)
    def query(ctx: ToolContext) -> str:
        """Run a query."""
        raise RuntimeError("INSERT INTO users (password) VALUES ('hunter2')")

    return tools


async def test_a_timed_out_call_that_is_not_idempotent_has_an_unknown_outcome(tmp_path: Path) -> None:
    tools, ctx = toolset(), ToolContext(tmp_path, tmp_path)
    text, is_error = await run_tool(tools.get("deploy"), ctx, {})  # type: ignore[arg-type]
    assert is_error and "outcome of this tool call is unknown" in text and "may or may not" in text
    text, is_error = await run_tool(tools.get("look"), ctx, {})  # type: ignore[arg-type]
    assert is_error and "safe to retry" in text and "unknown" not in text


async def test_exception_text_never_reaches_the_model(tmp_path: Path) -> None:
    text, is_error = await run_tool(toolset().get("query"), ToolContext(tmp_path, tmp_path), {})  # type: ignore[arg-type]
    assert is_error and "RuntimeError" in text and "hunter2" not in text and "INSERT" not in text
