"""MCP elicitation answered in Slack, with the real packages: the REAL bundled Claude Code CLI in a `-p`
run whose MCP server asks for input (the Elicitation hook, HTTP and command kinds, from the docs'
snippets), and `mcp`'s own clients with signoff.elicitation's callback (the docs' example, a
ClientSession over stdio; and mcp.Client in the 2026-07-28 era): accept, decline, and nobody answering."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from pathlib import Path
from typing import Any

import mcp
import pytest

from bot.sandbox.model import message, text, tool_use
from bot.sandbox.signed import checkboxes, number_input, static_select
from signoff.client import AsyncSignoffClient
from signoff.elicitation import elicitation_callback
from tests.client.claude_cli import ClaudeCli, signoff_command
from tests.client.helpers import pending_id
from tests.fakes.claude_api import FakeClaudeApi
from tests.support.app import API_TOKEN, App
from tests.support.docs import doc_example

SERVER = Path(__file__).parent / "elicit_server.py"
DOCS_SERVER = "http://127.0.0.1:3000"
TOOL = "mcp__deployer__deploy"


async def answer_form(app: App, request_id: str, *, environment: str = "production", replicas: str = "3",
                      regions: list[str] | None = None) -> None:
    await app.click(request_id, "U1", action="signoff_elicit_open", user_name="alice")
    [opened] = await app.slack.wait_for("views.open")
    values = {"f:environment": {"value": static_select(environment)},
              "f:replicas": {"value": number_input(replicas)}, "f:confirm": {"value": checkboxes(["true"])}}
    if regions is not None:  # the server's multi-select (list[Literal[...]]): checkboxes in the form
        values["f:regions"] = {"value": checkboxes(regions)}
    response = await app.slack_client.view_submission(
        user="U1", user_name="alice", callback_id="signoff_elicit_form",
        private_metadata=opened.args["view"]["private_metadata"], values=values)
    assert response.status == 200 and response.text in ("", "{}"), response.text


def hook_settings(name: str, server: str, query: str) -> str:
    settings = json.loads(doc_example(name))
    [entry] = settings["hooks"]["Elicitation"]
    [hook] = entry["hooks"]
    assert hook["onFailure"] == "block"
    if hook["type"] == "http":
        hook["url"] = hook["url"].replace(DOCS_SERVER, server).replace("wait=300", query)
    else:
        assert hook["command"].startswith("signoff hook claude-code")
        hook["command"] = hook["command"].replace("signoff", signoff_command(), 1).replace("--wait 300", query)
    return json.dumps(settings)


def mcp_config(*args: str) -> str:
    return json.dumps({"mcpServers": {"deployer": {"command": sys.executable, "args": [str(SERVER), *args]}}})


async def run_cli(app: App, model: FakeClaudeApi, tmp_path: Path, settings: str,
                  *server_args: str) -> asyncio.Task[dict[str, Any]]:
    cli = ClaudeCli(model, tmp_path, {"SIGNOFF_TOKEN": API_TOKEN, "SIGNOFF_URL": app.url})
    model.script(message(text("Asking where."), tool_use(TOOL, {}, id="toolu_elicit_1")), message(text("Done.")))
    return asyncio.create_task(cli.run("deploy build 42", "--mcp-config", mcp_config(*server_args), "--allowedTools", TOOL,
                                       "--settings", settings))


def tool_output(model: FakeClaudeApi) -> str:
    [result] = model.tool_results(1)
    return json.dumps(result)


async def test_the_real_cli_gets_the_form_answered_in_slack_over_the_http_hook(
        app: App, model: FakeClaudeApi, tmp_path: Path) -> None:
    running = await run_cli(app, model, tmp_path, hook_settings("claude-elicitation-http", app.url,
                                                                "wait=60&channel=C1&approvers=U1"))
    request_id = await pending_id(app)
    _, asked = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert asked["kind"] == "question" and asked["action"]["params"]["server"] == "deployer"
    assert asked["action"]["params"]["message"] == "Where should I deploy build 42?"
    await answer_form(app, request_id, regions=["eu", "ap"])
    result = await running
    assert result["_exit"] == 0 and result["result"] == "Done.", result
    assert "deploying to production x3 confirm=True note='' regions=eu,ap" in tool_output(model)
    _, stored = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert stored["status"] == "answered" and stored["decision"]["decided_by"]["name"] == "alice"


async def test_the_real_cli_gets_the_form_answered_in_slack_over_the_command_hook(
        app: App, model: FakeClaudeApi, tmp_path: Path) -> None:
    """The command hook passes the answer on only once the server's signature over it checks
    (a forged one: tests/api/test_signed_elicitations.py)."""
    running = await run_cli(app, model, tmp_path, hook_settings("claude-elicitation-command", app.url,
                                                                "--wait 60 --channel C1"))
    request_id = await pending_id(app)
    await answer_form(app, request_id, environment="staging", regions=["us"])
    result = await running
    assert result["_exit"] == 0, result
    assert "deploying to staging x3 confirm=True note='' regions=us" in tool_output(model)


async def test_the_real_cli_gets_cancel_when_nobody_answers(app: App, model: FakeClaudeApi, tmp_path: Path) -> None:
    running = await run_cli(app, model, tmp_path, hook_settings("claude-elicitation-http", app.url,
                                                                "wait=0.5&channel=C1"))
    result = await running
    assert result["_exit"] == 0, result
    assert "not deploying: cancel" in tool_output(model)
    _, listing = await app.api("GET", "/api/v1/approvals")
    assert [r["status"] for r in listing["items"]] == ["cancelled"]


async def test_the_docs_callback_answers_a_client_session_from_slack(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_URL", app.url)
    monkeypatch.setenv("SIGNOFF_TOKEN", API_TOKEN)
    example: dict[str, Any] = {}
    exec(doc_example("mcp-elicitation-callback").replace("C0123ABCD", "C1"), example)  # noqa: S102 - the docs' code
    running = asyncio.create_task(example["deploy"](str(SERVER)))
    request_id = await pending_id(app)
    await answer_form(app, request_id, environment="staging", replicas="2", regions=["eu", "us"])
    assert await running == "deploying to staging x2 confirm=True note='' regions=eu,us"


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_the_callback_in_both_eras_declines_and_cancels_when_nobody_answers(app: App, era: str) -> None:
    sys.path.insert(0, str(SERVER.parent))
    try:
        from elicit_server import server
    finally:
        sys.path.remove(str(SERVER.parent))
    async with AsyncSignoffClient(app.url, API_TOKEN) as signoff:
        declining = elicitation_callback(signoff, channel="C1", server="deployer")
        async with mcp.Client(server, mode=era, elicitation_callback=declining) as client:  # type: ignore[arg-type]
            running = asyncio.create_task(client.call_tool("deploy", {}))
            request_id = await pending_id(app)
            await app.click(request_id, "U1", action="signoff_elicit_decline", user_name="alice")
            result = await running
        assert result.content[0].text == "not deploying: decline"  # type: ignore[union-attr]

        impatient = elicitation_callback(signoff, channel="C1", timeout=0.5)
        async with mcp.Client(server, mode=era, elicitation_callback=impatient) as client:  # type: ignore[arg-type]
            result = await client.call_tool("deploy", {})
        assert result.content[0].text == "not deploying: cancel"  # type: ignore[union-attr]
    _, listing = await app.api("GET", "/api/v1/approvals")
    assert sorted(r["status"] for r in listing["items"]) == ["cancelled", "rejected"]


@pytest.mark.parametrize("server_args, era", [(("--say-era",), "2026-07-28"), (("--say-era", "--legacy-only"), None)])
async def test_the_real_cli_asks_in_slack_in_each_protocol_era_it_speaks(
        app: App, model: FakeClaudeApi, tmp_path: Path, server_args: tuple[str, ...], era: str | None) -> None:
    """The CLI opens with 2026-07-28 (the tool returns InputRequiredResult); a server that serves only the
    handshake era makes it fall back to `initialize` (the server sends elicitation/create mid-call)."""
    running = await run_cli(app, model, tmp_path, hook_settings("claude-elicitation-http", app.url,
                                                                "wait=60&channel=C1"), *server_args)
    request_id = await pending_id(app)
    await answer_form(app, request_id)
    result = await running
    said = tool_output(model)
    assert result["_exit"] == 0 and "deploying to production x3 confirm=True" in said, said
    if era is not None:
        assert f"(protocol {era})" in said
    else:
        assert "(protocol 2025-" in said or "(protocol 2024-" in said, said


def test_the_command_hook_answers_garbled_input_and_an_unreachable_server_with_cancel_and_why() -> None:
    from bench.harness import free_port
    from signoff import hook

    nowhere = f"http://127.0.0.1:{free_port()}"
    for stdin, expected in [
        (json.dumps({"hook_event_name": "Elicitation", "session_id": "s"}), "mcp_server_name: Field required"),
        (json.dumps({"hook_event_name": "Elicitation", "session_id": "s", "mcp_server_name": "deployer",
                     "message": "Where?", "mode": "form", "requested_schema": {"type": "object"}}),
         "cannot reach the Signoff server"),
    ]:
        out = io.StringIO()
        assert hook.run(["--url", nowhere, "--token", "t", "--wait", "4"], io.StringIO(stdin), out) == 0
        answer = json.loads(out.getvalue())
        assert answer["hookSpecificOutput"] == {"hookEventName": "Elicitation", "action": "cancel"}, answer
        assert expected in answer["systemMessage"], answer
