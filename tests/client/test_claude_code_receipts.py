"""The real Claude Code CLI (offline, against the fake Messages API) with `signoff hook claude-code` as
its PreToolUse and PostToolUse hook: what ran reaches the card and the audit (issue 37), and a Write
approved on a file that another process then changed is asked again with the new preview, not written."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from bot.sandbox.model import message, text, tool_use
from bot.sandbox.signed import plain_input
from tests.fakes.claude_api import FakeClaudeApi
from tests.client.claude_cli import ClaudeCli, signoff_command
from tests.support.docs import doc_example
from tests.client.helpers import next_pending, pending_id
from tests.support.app import API_TOKEN, App
from tests.support.outbox import settle
from tests.support.waits import until


def cli_for(app_url: str, model: FakeClaudeApi, tmp_path: Path) -> ClaudeCli:
    return ClaudeCli(model, tmp_path, {"SIGNOFF_URL": app_url, "SIGNOFF_TOKEN": API_TOKEN, "SIGNOFF_CHANNEL": "C1",
                                       "SIGNOFF_APPROVERS": "U1,U2"})


def pre_and_post(*hook_args: str, matcher: str = "Write|Edit|MultiEdit|Bash") -> str:
    """Settings with the hook as PreToolUse (asks) and PostToolUse (reports what ran), as the docs show."""
    command = " ".join([signoff_command(), "hook", "claude-code", *hook_args])
    hook = [{"matcher": matcher, "hooks": [{"type": "command", "command": command, "timeout": 60}]}]
    return json.dumps({"hooks": {"PreToolUse": hook, "PostToolUse": hook}})


def shown(card: Any) -> str:
    return card.text + "\n" + json.dumps(card.blocks, ensure_ascii=False)


async def request(app: App, request_id: str) -> dict[str, Any]:
    status, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert status == 200, body
    return body


async def reported(app: App, request_id: str) -> dict[str, Any]:
    """The request once the PostToolUse hook's report landed (the CLI may finish a moment after it)."""
    async def landed() -> dict[str, Any] | None:
        body = await request(app, request_id)
        return body if body["outcome_status"] != "not_reported" else None

    return await until(landed, f"the PostToolUse hook's report of {request_id}")


async def test_post_tool_use_reports_what_ran_to_the_card_and_the_audit(app: App, model: FakeClaudeApi,
                                                                          tmp_path: Path) -> None:
    cli = cli_for(app.url, model, tmp_path)
    target = cli.work / "config.yaml"
    target.write_text("replicas: 2\n")
    model.script(message(text("Scaling."), tool_use("Write", {"file_path": str(target), "content": "replicas: 9\n"},
                                                    id="toolu_post_1")),
                 message(text("Done.")))
    (cli.work / ".claude").mkdir()
    (cli.work / ".claude" / "settings.json").write_text(doc_example("receipts-claude-settings"))  # as docs say
    running = asyncio.create_task(cli.run("scale to 9"))
    request_id = await pending_id(app)
    assert (await request(app, request_id))["state"].startswith("sha256:")  # bound to the file as previewed
    await app.click(request_id, "U1", user_name="alice")
    result = await running
    assert result["_exit"] == 0 and result["result"] == "Done.", result
    assert target.read_text() == "replicas: 9\n"

    body = await reported(app, request_id)
    assert body["outcome_status"] == "ran" and body["outcome"]["same_params"] is True, body
    assert body["outcome"]["params"] == {"file_path": str(target), "content": "replicas: 9\n"}
    await settle(app)
    said = shown(await app.card(request_id))
    assert "with the approved parameters" in said, said
    assert app.signoff is not None
    assert [e.type for e in await app.signoff.store.audit_events(request_id)].count("run_ran") == 1


async def test_a_write_approved_on_a_file_that_then_changed_is_asked_again_not_written(
        app: App, model: FakeClaudeApi, tmp_path: Path) -> None:
    cli = cli_for(app.url, model, tmp_path)
    target = cli.work / "config.yaml"
    target.write_text("replicas: 2\n")
    model.script(message(text("Scaling."), tool_use("Write", {"file_path": str(target), "content": "replicas: 9\n"},
                                                    id="toolu_state_1")),
                 message(text("Understood.")))
    running = asyncio.create_task(cli.run("scale to 9", "--settings", pre_and_post("--wait", "60")))
    first = await pending_id(app)
    assert "-replicas: 2" in (await request(app, first))["preview"]["unified"]
    # Another process changes the file while the card waits; the person approves what they saw.
    changer = await asyncio.create_subprocess_exec("sh", "-c", f"printf 'replicas: 5\\n' > '{target}'")
    assert await changer.wait() == 0
    await app.click(first, "U1", user_name="alice")

    second = await next_pending(app, first)  # asked again, with the new preview
    assert second != first
    again = await request(app, second)
    assert again["summary"].endswith("(the file changed since you approved)"), again["summary"]
    assert "-replicas: 5" in again["preview"]["unified"] and f"changed since you approved {first}" in again["context"]
    skipped = await request(app, first)
    assert skipped["outcome_status"] == "skipped" and "file changed" in skipped["outcome"]["error"]
    await settle(app)
    assert "Not run" in shown(await app.card(first))

    await app.click(second, "U2", action="signoff_reject", user_name="bob")
    [opened] = await app.slack.wait_for("views.open")
    await app.slack_client.view_submission(user="U2", user_name="bob", callback_id="signoff_reject",
                                           private_metadata=opened.args["view"]["private_metadata"],
                                           values={"reason": {"value": plain_input("5 is right now")}})
    result = await running
    assert result["_exit"] == 0, result
    assert target.read_text() == "replicas: 5\n"  # not written: neither the stale approval nor the rejection
    [tool_result] = model.tool_results(1)
    assert tool_result.get("is_error") and "5 is right now" in json.dumps(tool_result)
    assert (await request(app, second))["outcome_status"] is None  # rejected: nothing to report
