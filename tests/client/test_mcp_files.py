"""The MCP `permission_prompt` tool reads files only where it runs for the agent (`signoff mcp` over stdio),
never on the server (/mcp over HTTP): a remote agent names the path (issue 33, the agent's bounds)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.sandbox import SlackEmulator
from tests.support.app import App, start_app
from tests.client.helpers import pending_id
from tests.client.test_mcp import over_http

AGENT = "tok-mcp-agent-1"


async def test_a_remote_permission_prompt_never_shows_a_server_file(db_url: str, slack: SlackEmulator,
                                                                    tmp_path: Path) -> None:
    secret = tmp_path / "server.env"
    secret.write_text("SLACK_BOT_TOKEN=xoxb-do-not-show\n")
    app: App = await start_app(db_url, slack, SIGNOFF_API_TOKENS=f"mcp-agent:{AGENT}:agent",
                               SIGNOFF_DEFAULT_CHANNEL="C1")
    try:
        async with over_http(app, AGENT) as session:
            call = asyncio.create_task(session.call_tool("permission_prompt", {
                "tool_name": "Write", "input": {"file_path": str(secret), "content": "x\n"}}))
            app.headers = {"Authorization": f"Bearer {AGENT}"}
            request_id = await pending_id(app)
            _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
            await app.api("POST", f"/api/v1/approvals/{request_id}/cancel", json={})
            await call
        assert "xoxb-do-not-show" not in str(body["preview"]), body["preview"]
        # The card still shows what the call writes, and does not claim the file is new.
        assert "+x\n" in body["preview"]["unified"] and "/dev/null" not in body["preview"]["unified"]
        assert "its current content is not shown" in body["preview"]["unified"]
    finally:
        await app.stop()
