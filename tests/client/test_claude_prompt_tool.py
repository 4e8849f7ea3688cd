"""Claude Code's --permission-prompt-tool answered by `signoff mcp`: the real CLI starts the real server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from bot.sandbox.model import message, text, tool_use
from tests.fakes.claude_api import FakeClaudeApi
from bot.sandbox.signed import plain_input
from tests.support.app import API_TOKEN, App
from tests.client.claude_cli import ClaudeCli
from tests.support.docs import doc_example
from tests.client.helpers import cards, pending_id

PROMPT_TOOL = "mcp__signoff__permission_prompt"


def mcp_config() -> str:
    """The README's stdio config: `signoff mcp`, found on PATH, with SIGNOFF_* from the CLI's environment."""
    return doc_example("mcp-stdio")


def cli_for(app: App, model: FakeClaudeApi, tmp_path: Path) -> ClaudeCli:
    return ClaudeCli(model, tmp_path, {"SIGNOFF_URL": app.url, "SIGNOFF_TOKEN": API_TOKEN, "SIGNOFF_CHANNEL": "C1"})


async def test_prompt_tool_approve_with_edits_then_deny(app: App, model: FakeClaudeApi, tmp_path: Path) -> None:
    cli = cli_for(app, model, tmp_path)
    target = cli.work / "motd.txt"
    model.script(message(tool_use("Write", {"file_path": str(target), "content": "hello\n"}, id="toolu_prompt_1")),
                 message(text("Written.")))
    args = ("--permission-prompt-tool", PROMPT_TOOL, "--mcp-config", mcp_config())
    running = asyncio.create_task(cli.run("write the motd", *args))
    request_id = await pending_id(app)
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert body["action"]["name"] == "Write" and body["preview"]["kind"] == "diff"
    await app.click(request_id, "U1", action="signoff_edit", user_name="alice")
    [opened] = await app.slack.wait_for("views.open")
    await app.slack_client.view_submission(user="U1", user_name="alice", callback_id="signoff_edit",
                                           private_metadata=opened.args["view"]["private_metadata"],
                                           values={"p:content": {"value": plain_input("hello, edited\n")}})
    result = await running
    assert result["_exit"] == 0 and result["result"] == "Written.", result
    assert target.read_text() == "hello, edited\n"

    # The same session shape, denied: nothing is written and the model reads the reason.
    model.reset()
    other = cli.work / "other.txt"
    model.script(message(tool_use("Write", {"file_path": str(other), "content": "x\n"}, id="toolu_prompt_2")),
                 message(text("Fine.")))
    running = asyncio.create_task(cli.run("write other", *args))
    await app.click(await pending_id(app), "U2", action="signoff_reject", user_name="bob")
    [_, opened] = await app.slack.wait_for("views.open", count=2)
    await app.slack_client.view_submission(user="U2", user_name="bob", callback_id="signoff_reject",
                                           private_metadata=opened.args["view"]["private_metadata"],
                                           values={"reason": {"value": plain_input("No new files today")}})
    denied = await running
    assert denied["_exit"] == 0 and not other.exists(), denied
    [tool_result] = model.tool_results(1)
    assert tool_result.get("is_error") and "No new files today" in json.dumps(tool_result)
    assert cards(app.slack) == 2


async def test_readme_http_config_as_the_prompt_tool(app: App, model: FakeClaudeApi, tmp_path: Path) -> None:
    """The MCP page's /mcp config (written by its shell snippet) and command: the CLI talks streamable HTTP to the main server."""
    cli = cli_for(app, model, tmp_path)
    code, out, err = await cli.shell(doc_example("mcp-http"))  # writes mcp.json from SIGNOFF_* as pasted
    assert code == 0 and app.url in (cli.work / "mcp.json").read_text(), (out, err)
    readme = cli.work / "README.md"
    model.script(message(tool_use("Write", {"file_path": str(readme), "content": "# Tidy\n"}, id="toolu_http_1")),
                 message(text("Tidied.")))
    running = asyncio.create_task(cli.shell(doc_example("mcp-claude")))
    request_id = await pending_id(app)
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert body["requested_by"] == "MCP client over HTTP" and body["action"]["name"] == "Write"
    assert body["channel"] == "C1"  # SIGNOFF_CHANNEL, written into the configured URL
    await app.click(request_id, "U1", user_name="alice")
    code, out, err = await running
    assert code == 0 and "Tidied." in out, (out, err)
    assert readme.read_text() == "# Tidy\n"
