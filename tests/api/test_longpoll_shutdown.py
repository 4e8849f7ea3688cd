"""A server shutting down (a deploy, a replica scaled in) answers its held long-polls at once with the state
they have, instead of holding the shutdown for up to each poll's wait: the agent polls again, elsewhere or
after the restart."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from bot.sandbox import SlackEmulator
from tests.client.helpers import pending_id
from tests.support.app import API_TOKEN, start_app
from tests.support.waits import waiting_on


async def test_a_shutdown_answers_a_held_long_poll_with_its_pending_state(db_url: str, slack: SlackEmulator) -> None:
    app = await start_app(db_url, slack)
    stopped = False
    try:
        req = await app.submit()
        async with aiohttp.ClientSession() as agent:  # the agent's own connection, not the test app's session
            poll = asyncio.create_task(agent.get(f"{app.url}/api/v1/approvals/{req['id']}?wait=60",
                                                 headers={"Authorization": f"Bearer {API_TOKEN}"}))
            await waiting_on(app, req["id"])
            stopping = asyncio.create_task(app.stop())
            # Without the shutdown's answer both would take the poll's 60 s (aiohttp waits for handlers).
            response = await asyncio.wait_for(poll, 30)
            await asyncio.wait_for(stopping, 30)
            stopped = True
            assert response.status == 200
            body = await response.json()
            assert body["id"] == req["id"] and body["status"] == "pending", body
    finally:
        if not stopped:
            await app.stop()


async def test_a_shutdown_answers_a_held_claude_code_hook_at_once(db_url: str, slack: SlackEmulator) -> None:
    """The HTTP hook waits by long-polls of its own: on a stopping server it answers (nobody decided: a deny
    that says the request is still waiting) instead of polling again and again until its `wait` ran out."""
    app = await start_app(db_url, slack)
    stopped = False
    try:
        call = {"session_id": "sess-stop", "cwd": "/work", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                "tool_input": {"command": "rm -rf build"}, "tool_use_id": "toolu_stop_1"}
        async with aiohttp.ClientSession() as claude:
            hook = asyncio.create_task(claude.post(f"{app.url}/api/v1/hooks/claude-code?wait=20&channel=C1", json=call,
                                                   headers={"Authorization": f"Bearer {API_TOKEN}"}))
            await waiting_on(app, await pending_id(app))
            assert app.signoff is not None
            service = app.signoff.service
            wait, polls = service.wait, [0]

            async def counted(*args: Any, **kw: Any) -> Any:
                polls[0] += 1
                return await wait(*args, **kw)

            service.wait = counted  # type: ignore[method-assign]
            stopping = asyncio.create_task(app.stop())
            response = await asyncio.wait_for(hook, 30)
            await asyncio.wait_for(stopping, 30)
            stopped = True
            # It was: poll after poll, each answered at once by the stopping server, until `wait` ran out
            # (thousands of them, the event loop hardly free: a 60 s shutdown).
            assert polls[0] <= 1, f"{polls[0]} long-polls after the stop began"
            out = (await response.json())["hookSpecificOutput"]
            assert response.status == 200 and out["permissionDecision"] == "deny", out
            assert "is still waiting for a decision" in out["permissionDecisionReason"], out
    finally:
        if not stopped:
            await app.stop()
