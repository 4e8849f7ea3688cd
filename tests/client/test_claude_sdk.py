"""signoff.claude.can_use_tool through the real ClaudeSDKClient (and its bundled CLI) against a fake model."""

from __future__ import annotations

import asyncio
from pathlib import Path

from signoff import AsyncSignoffClient
from signoff.claude import can_use_tool
from bot.sandbox.model import message, text, tool_use
from tests.fakes.claude_api import FakeClaudeApi
from bot.sandbox.signed import plain_input
from tests.support.app import API_TOKEN, App
from bench.harness import free_port
from tests.client.claude_cli import ClaudeCli, run_sdk
from tests.client.helpers import pending_id


async def test_edit_and_approve_through_can_use_tool(app: App, model: FakeClaudeApi, tmp_path: Path) -> None:
    cli = ClaudeCli(model, tmp_path)
    target = cli.work / "plan.md"
    model.script(message(tool_use("Write", {"file_path": str(target), "content": "ship friday\n"}, id="toolu_sdk_1")),
                 message(text("Written.")))
    async with AsyncSignoffClient(app.url, API_TOKEN) as signoff:
        callback = can_use_tool(signoff, channel="C1", approvers=["U1"], session="sdk-test", cwd=str(cli.work))
        running = asyncio.create_task(run_sdk(cli, "write the plan", callback))
        request_id = await pending_id(app)
        _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
        assert body["preview"]["kind"] == "diff" and "+ship friday" in body["preview"]["unified"]
        assert "sdk-test" in body["context"] and body["action"]["name"] == "Write"
        await app.click(request_id, "U1", action="signoff_edit", user_name="alice")
        [opened] = await app.slack.wait_for("views.open")
        await app.slack_client.view_submission(user="U1", user_name="alice", callback_id="signoff_edit",
                                               private_metadata=opened.args["view"]["private_metadata"],
                                               values={"p:content": {"value": plain_input("ship monday\n")}})
        result = await running
    assert result.result == "Written." and target.read_text() == "ship monday\n"


async def test_ask_user_question_is_answered_from_slack(app: App, model: FakeClaudeApi, tmp_path: Path) -> None:
    cli = ClaudeCli(model, tmp_path)
    questions = [{"question": "Which region should I deploy to?", "header": "Region", "multiSelect": False,
                  "options": [{"label": "eu-west-1", "description": "Ireland"},
                              {"label": "us-east-1", "description": "Virginia"}]}]
    model.script(message(text("One question first."), tool_use("AskUserQuestion", {"questions": questions},
                                                                id="toolu_ask_1")),
                 message(text("Deploying to us-east-1.")))
    async with AsyncSignoffClient(app.url, API_TOKEN) as signoff:
        callback = can_use_tool(signoff, channel="C1", session="sdk-ask")
        running = asyncio.create_task(run_sdk(cli, "deploy", callback))
        request_id = await pending_id(app)
        assert request_id.startswith("qst_")
        card = await app.card(request_id)
        buttons = [e for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
        assert [b["text"]["text"] for b in buttons] == ["eu-west-1", "us-east-1"]
        await app.slack_client.block_action(user="U2", user_name="bob", action_id=buttons[1]["action_id"],
                                            value=request_id, block_id="signoff_q0", channel=card.channel,
                                            message_ts=card.ts)
        result = await running
    assert result.result == "Deploying to us-east-1."
    [answered] = model.tool_results(1)
    assert answered["tool_use_id"] == "toolu_ask_1" and not answered.get("is_error")
    assert '"Which region should I deploy to?"="us-east-1"' in str(answered["content"])


async def test_a_rejection_and_an_unreachable_server_are_denials(app: App, model: FakeClaudeApi,
                                                                 tmp_path: Path) -> None:
    cli = ClaudeCli(model, tmp_path)
    target = cli.work / "deploy.sh"
    model.script(message(tool_use("Write", {"file_path": str(target), "content": "rm -rf /\n"}, id="toolu_sdk_no")),
                 message(text("Understood.")))
    async with AsyncSignoffClient(app.url, API_TOKEN) as signoff:
        running = asyncio.create_task(run_sdk(cli, "write deploy.sh", can_use_tool(signoff, channel="C1")))
        request_id = await pending_id(app)
        await app.click(request_id, "U2", action="signoff_reject", user_name="bob")
        [opened] = await app.slack.wait_for("views.open")
        await app.slack_client.view_submission(user="U2", user_name="bob", callback_id="signoff_reject",
                                               private_metadata=opened.args["view"]["private_metadata"],
                                               values={"reason": {"value": plain_input("Never like this")}})
        await running
    assert not target.exists()
    [denied] = model.tool_results(1)
    assert denied.get("is_error") and "Rejected in Slack by bob: Never like this" in str(denied["content"])

    model.reset()
    model.script(message(tool_use("Write", {"file_path": str(target), "content": "x\n"}, id="toolu_sdk_down")),
                 message(text("OK.")))
    async with AsyncSignoffClient(f"http://127.0.0.1:{free_port()}", API_TOKEN, retry_for=0.5) as down:
        await run_sdk(cli, "write deploy.sh", can_use_tool(down, channel="C1"))
    assert not target.exists()
    [unavailable] = model.tool_results(1)
    assert unavailable.get("is_error") and "Signoff: no approval" in str(unavailable["content"])
