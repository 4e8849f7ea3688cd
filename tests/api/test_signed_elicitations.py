"""Signed elicitation answers: a man in the middle (tests/fakes/tamper_proxy.py) between the agent side and
the real server alters what a person answered to an MCP server's form, strips the signed question the
answer was read from, or hands over another question's genuine, signed answer. The command hook (run as
Claude Code runs it: a process reading stdin) and the client's elicitation callback (mcp's own Client)
pass none of them on: Claude Code gets `cancel` with the reason, the MCP client's host an error naming it;
the forged content reaches no MCP server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp
import pytest
from mcp.shared.exceptions import MCPError

import signoff.signatures as sig
from bot.sandbox.signed import checkboxes, static_select
from signoff.client import AsyncSignoffClient
from signoff.elicitation import elicitation_callback
from tests.api.test_signed_decisions import public_key
from tests.client.claude_cli import signoff_command
from tests.client.helpers import pending_id
from tests.fakes.tamper_proxy import TamperProxy
from tests.support.app import API_TOKEN, ROOT, App

pytestmark = pytest.mark.security

HOOK_PATH = "/api/v1/hooks/claude-code"
SCHEMA = {"type": "object", "required": ["target"], "properties": {
    "target": {"type": "string", "enum": ["staging", "production"]},
    "checks": {"type": "array", "items": {"type": "string", "enum": ["lint", "unit"]}}}}
FORGED = {"target": "production", "checks": []}


@pytest.fixture(autouse=True)
def fresh_keyring() -> Iterator[None]:
    sig.reset({})
    yield
    sig.reset({})


def elicitation(message: str) -> dict[str, Any]:
    return {"session_id": "sess-signed", "cwd": "/work", "hook_event_name": "Elicitation",
            "mcp_server_name": "deployer", "message": message, "mode": "form", "requested_schema": SCHEMA}


async def answer(app: App, request_id: str, target: str = "staging") -> None:
    await app.click(request_id, "U1", action="signoff_elicit_open", user_name="alice")
    opened = await app.slack.wait_for("views.open")
    response = await app.slack_client.view_submission(
        user="U1", user_name="alice", callback_id="signoff_elicit_form",
        private_metadata=opened[-1].args["view"]["private_metadata"],
        values={"f:target": {"value": static_select(target)}, "f:checks": {"value": checkboxes(["lint"])}})
    assert response.status == 200, response.text


async def command_hook(url: str, key: str, payload: dict[str, Any], wait: str = "30") -> asyncio.Task[bytes]:
    env = {**os.environ, "SIGNOFF_URL": url, "SIGNOFF_TOKEN": API_TOKEN, "SIGNOFF_CHANNEL": "C1",
           "SIGNOFF_APPROVERS": "U1", "SIGNOFF_PUBLIC_KEY": key, "PYTHONPATH": str(ROOT)}
    hook = await asyncio.create_subprocess_exec(
        *signoff_command().split(), "hook", "claude-code", "--wait", wait, env=env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)

    async def output() -> bytes:
        out, err = await asyncio.wait_for(hook.communicate(json.dumps(payload).encode()), 60)
        assert hook.returncode == 0, err.decode()
        return out

    return asyncio.create_task(output())


def with_content(body: dict[str, Any]) -> dict[str, Any]:
    """The answer and the signed question beside it, both made to say FORGED (only the signature can tell)."""
    reply = body.get("signoff")
    if not isinstance(reply, dict):
        return body
    request = reply["request"]
    decision = {**request["decision"], "params": {"content": FORGED}}
    return {"hookSpecificOutput": {**body["hookSpecificOutput"], "content": FORGED},
            "signoff": {**reply, "request": {**request, "decision": decision}}}


def without_question(body: dict[str, Any]) -> dict[str, Any]:
    return {"hookSpecificOutput": {**body["hookSpecificOutput"], "content": FORGED}}


@pytest.mark.parametrize("forge, said", [(with_content, "signature does not match"),
                                         (without_question, "without the signed question")],
                         ids=["altered", "unsigned"])
async def test_the_command_hook_passes_no_forged_answer_on(app: App, forge: Any, said: str) -> None:
    key = await public_key(app)
    proxy = await TamperProxy(app.url, paths=(HOOK_PATH,)).start()
    proxy.tamper = forge
    try:
        running = await command_hook(proxy.url, key, elicitation("Where should I deploy build 7?"))
        await answer(app, await pending_id(app))
        result = json.loads(await running)
    finally:
        await proxy.stop()
    assert proxy.tampered
    assert result["hookSpecificOutput"] == {"hookEventName": "Elicitation", "action": "cancel"}, result
    assert said in result["systemMessage"], result


async def test_the_command_hook_refuses_another_questions_genuine_answer(app: App) -> None:
    """A genuine answer passes on exactly as signed; replayed for the next question, it is refused."""
    key = await public_key(app)
    proxy = await TamperProxy(app.url, paths=(HOOK_PATH,)).start()
    seen: list[dict[str, Any]] = []
    proxy.tamper = lambda body: seen.append(body) or body
    try:
        running = await command_hook(proxy.url, key, elicitation("Where should I deploy build 7?"))
        await answer(app, await pending_id(app), target="production")
        genuine = json.loads(await running)
        assert genuine == {"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept",
                                                  "content": {"target": "production", "checks": ["lint"]}}}
        proxy.tamper = lambda body: seen[0]
        replayed = json.loads(await (await command_hook(proxy.url, key, elicitation("Where should build 8 go?"),
                                                        wait="0.3")))
    finally:
        await proxy.stop()
    assert replayed["hookSpecificOutput"] == {"hookEventName": "Elicitation", "action": "cancel"}, replayed
    assert "not submitted under this call's key" in replayed["systemMessage"], replayed


async def test_the_client_callback_passes_no_altered_answer_to_the_mcp_server(app: App) -> None:
    sys.path.insert(0, str(Path(__file__).parent.parent / "client"))
    try:
        from elicit_server import server
    finally:
        sys.path.pop(0)
    proxy = await TamperProxy(app.url, paths=("/api/v1/questions", "/api/v1/approvals")).start()

    def altered(body: dict[str, Any]) -> dict[str, Any]:
        if body.get("status") == "answered":
            body["decision"] = {**body["decision"], "params": {"content": {
                "environment": "production", "replicas": 20, "confirm": True}}}
        return body

    proxy.tamper = altered
    try:
        async with AsyncSignoffClient(proxy.url, API_TOKEN) as signoff:
            callback = elicitation_callback(signoff, channel="C1", server="deployer")
            async with mcp.Client(server, mode="legacy", elicitation_callback=callback) as client:  # type: ignore[arg-type]
                running = asyncio.create_task(client.call_tool("deploy", {}))
                request_id = await pending_id(app)
                await app.click(request_id, "U1", action="signoff_elicit_open", user_name="alice")
                opened = await app.slack.wait_for("views.open")
                await app.slack_client.view_submission(
                    user="U1", user_name="alice", callback_id="signoff_elicit_form",
                    private_metadata=opened[-1].args["view"]["private_metadata"],
                    values={"f:environment": {"value": static_select("staging")},
                            "f:replicas": {"value": {"type": "number_input", "value": "1"}},
                            "f:confirm": {"value": checkboxes(["true"])}})
                with pytest.raises(MCPError) as refused:  # the tool never ran on the altered answer
                    await running
    finally:
        await proxy.stop()
    assert proxy.tampered
    said = str(refused.value)
    assert "answer failed its check" in said and "signature does not match" in said, said
