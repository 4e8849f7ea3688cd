"""Waiting clients against the running server (issue 34, item 1): a card Slack refuses ends every
wait with a typed error naming the cause and the fix, and no client loop runs without a bound on its
rate (long-polls back early, 5xx and 429 storms with `Retry-After: 0`, the server restarting).

Every request is counted where it lands: a proxy in front of the app records each one it forwards
(or answers itself). The bounds are far above what the paced clients send and far below what an
unpaced loop sends in the same seconds (thousands); no test measures time.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from signoff import AsyncSignoffClient, SignoffClient, StillPending, UndeliverableError, require_approval
from tests.fakes.flaky_proxy import FlakyProxy
from tests.support.app import API_TOKEN, ROOT, App

NOWHERE = "C0123ABCD"  # the README's example channel: the workspace has no such channel
PARAMS = {"to": "customer@example.com", "amount": 40}
ASK = {"summary": "Refund customer@example.com", "approvers": ["U1"]}
GIVE_UP = 5.0  # a bound on each wait, so the code before the fix ends (with thousands of GETs) instead of hanging
POLLS = "GET /api/v1/approvals/"


def assert_names_the_cause(exc: UndeliverableError, request_id: str | None = None) -> None:
    assert exc.code == "undeliverable" and exc.reason == "channel_not_found" and exc.channel == NOWHERE
    assert exc.request_id is not None and exc.request_id.startswith("apr_")
    assert request_id is None or exc.request_id == request_id
    assert f"channel {NOWHERE} does not exist" in exc.message and "/invite @signoff" in exc.message
    assert "not approved" in exc.message and "SIGNOFF_CHANNEL" in exc.message
    assert exc.delivery["status"] == "failed"


async def status_of(app: App, request_id: str) -> str:
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    return str(body["status"])


async def test_an_undeliverable_card_ends_the_python_clients_wait_at_once(app: App, proxy: FlakyProxy) -> None:
    sync = SignoffClient(proxy.url, API_TOKEN)
    with pytest.raises(UndeliverableError) as caught:
        await asyncio.to_thread(sync.request_approval, "refund", PARAMS, channel=NOWHERE, timeout=GIVE_UP, **ASK)
    assert_names_the_cause(caught.value)
    assert caught.value.message.endswith("The request was cancelled.")
    assert await status_of(app, caught.value.request_id or "") == "cancelled"  # nobody approves it later
    async with AsyncSignoffClient(proxy.url, API_TOKEN) as signoff:
        with pytest.raises(UndeliverableError) as async_caught:
            await signoff.request_approval("refund", PARAMS, channel=NOWHERE, timeout=GIVE_UP, **ASK)
        assert_names_the_cause(async_caught.value)
        # Waiting on an id (not made by this call) raises too, and leaves the request as it is.
        handle = await signoff.submit("refund", PARAMS, channel=NOWHERE, **ASK)
        with pytest.raises(UndeliverableError) as waited:
            await signoff.wait(handle.id, timeout=GIVE_UP)
        assert_names_the_cause(waited.value, handle.id)
        assert await status_of(app, handle.id) == "pending"
    assert proxy.seen(POLLS) <= 6  # a long-poll or two per wait; before: about 1,300 a second


async def test_require_approval_does_not_run_the_tool(app: App, proxy: FlakyProxy) -> None:
    ran: list[Any] = []

    @require_approval(summary="Refund {amount} to {to}", channel=NOWHERE, timeout=GIVE_UP,
                      client=SignoffClient(proxy.url, API_TOKEN))
    def refund(to: str, amount: int) -> str:
        ran.append((to, amount))
        return "refunded"

    @require_approval(channel=NOWHERE, timeout=GIVE_UP, client=AsyncSignoffClient(proxy.url, API_TOKEN))
    async def refund_later(to: str, amount: int) -> str:
        ran.append((to, amount))
        return "refunded"

    with pytest.raises(UndeliverableError) as caught:
        await asyncio.to_thread(refund, "customer@example.com", 40)
    assert_names_the_cause(caught.value)
    with pytest.raises(UndeliverableError):
        await refund_later("customer@example.com", 40)
    assert ran == [] and proxy.seen(POLLS) <= 4


async def test_long_polls_that_come_back_early_are_paced(app: App, proxy: FlakyProxy) -> None:
    """A proxy that does not hold requests: every long-poll returns at once, the request still pending."""
    proxy.no_long_polls()
    pending = await app.submit()
    with pytest.raises(StillPending):
        await asyncio.to_thread(SignoffClient(proxy.url, API_TOKEN).wait, pending["id"], GIVE_UP)
    sync_polls = proxy.seen(POLLS)
    async with AsyncSignoffClient(proxy.url, API_TOKEN) as signoff:
        assert await signoff.decision(pending["id"], GIVE_UP) is None
    async_polls = proxy.seen(POLLS) - sync_polls
    # At least a second apart, the gap doubling (1-2 s, 2-4 s, ...): about 4 in 5 s, plus the last look.
    assert 2 <= sync_polls <= 7 and 2 <= async_polls <= 7, (sync_polls, async_polls)


async def test_errors_and_a_restart_never_become_a_tight_loop(app: App, proxy: FlakyProxy) -> None:
    """503 and 429 storms with `Retry-After: 0`, a 429 asking for 2 s, then the port refusing connections:
    the client waits on the same request throughout, paced, and gets the decision once it is back."""
    pending = await app.submit()
    async with AsyncSignoffClient(proxy.url, API_TOKEN, retry_for=120) as signoff:
        waiting = asyncio.create_task(signoff.wait(pending["id"]))
        await proxy.wait_for(POLLS)
        counts = {}
        for name, status, headers in [("503", 503, {"Retry-After": "0"}), ("429 now", 429, {"Retry-After": "0"}),
                                      ("429 in 2s", 429, {"Retry-After": "2"})]:
            before = proxy.seen(POLLS)
            proxy.answer_all(status, headers)
            await asyncio.sleep(3)  # deliberate: the storm lasts this long; what is counted is the requests
            counts[name] = proxy.seen(POLLS) - before
        proxy.forward()
        await proxy.go_down()  # the server restarting: connections refused
        await asyncio.sleep(3)  # deliberate: the outage lasts this long; what is counted is the requests
        await proxy.come_back()
        before = proxy.seen(POLLS)
        await proxy.wait_for(POLLS, count=before + 1, timeout=30)  # back on the same request
        await app.click(pending["id"], "U1", user_name="alice")
        decision = await asyncio.wait_for(waiting, 30)
    assert decision.approved and decision.request_id == pending["id"]
    # Jittered backoff from 0.1-0.2 s doubling: at most 6 tries in 3 s; Retry-After: 2 allows 2.
    assert counts["503"] <= 8 and counts["429 now"] <= 8 and counts["429 in 2s"] <= 3, counts
    assert proxy.seen("POST ") == 0  # the submit was the test's; the client never resubmits


def cli_env(url: str, **extra: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SIGNOFF_URL": url, "SIGNOFF_TOKEN": API_TOKEN,
            "PYTHONPATH": str(ROOT), **extra}


async def run_cli(url: str, *argv: str, stdin: str = "", **env: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "signoff.cli", *argv, env=cli_env(url, **env), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_signoff_wait_says_why_it_ends_and_what_it_waits_for(app: App, proxy: FlakyProxy) -> None:
    nowhere = await app.submit(channel=NOWHERE)
    code, out, err = await run_cli(proxy.url, "wait", nowhere["id"], "--timeout", str(GIVE_UP))
    assert code == 4, (code, err)
    assert "channel_not_found" in err and f"channel {NOWHERE} does not exist" in err and nowhere["id"] in err
    printed = json.loads(out)
    assert printed["outcome"] is None and printed["error"] == "undeliverable"
    assert printed["delivery"]["error"] == "channel_not_found"
    assert proxy.seen(POLLS) <= 2
    pending = await app.submit()
    code, out, err = await run_cli(proxy.url, "wait", pending["id"], "--timeout", "2")
    assert code == 3 and "still pending after 2s" in err
    assert pending["id"] in err and "channel C1" in err and "requested " + pending["created_at"] in err
    assert "U1, U2" in err and "signoff wait " + pending["id"] in err


async def test_signoff_mcp_answers_an_undeliverable_card_with_an_error(app: App, proxy: FlakyProxy) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "signoff.cli", "mcp", "--channel", NOWHERE],
                                   cwd=str(ROOT), env=cli_env(proxy.url))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await asyncio.wait_for(session.call_tool("request_approval", {
            "action": "refund", "params": PARAMS, "summary": "Refund customer@example.com",
            "timeout_seconds": GIVE_UP}), 30)
        assert result.is_error
        text = result.content[0].text  # type: ignore[union-attr]
        assert "channel_not_found" in text and f"channel {NOWHERE} does not exist" in text and "cancelled" in text
        prompt = await asyncio.wait_for(session.call_tool("permission_prompt", {
            "tool_name": "Bash", "input": {"command": "rm -rf build"}, "tool_use_id": "toolu_01"}), 30)
        answer = json.loads(prompt.content[0].text)  # type: ignore[union-attr]
        assert answer["behavior"] == "deny" and "channel_not_found" in answer["message"]
    assert proxy.seen(POLLS) <= 4


async def test_the_hook_denies_an_undeliverable_card_naming_it(app: App, proxy: FlakyProxy) -> None:
    hook = {"session_id": "6f1c2d9e-8a0b-4c57-9d3e-2b1f0a7c5e11", "tool_name": "Bash", "tool_use_id": "toolu_01",
            "tool_input": {"command": "rm -rf build"}, "hook_event_name": "PreToolUse", "cwd": str(ROOT)}
    code, out, _ = await run_cli(proxy.url, "hook", "claude-code", "--channel", NOWHERE, "--wait", str(GIVE_UP),
                                 stdin=json.dumps(hook))
    answer = json.loads(out)["hookSpecificOutput"]
    assert code == 0 and answer["permissionDecision"] == "deny"
    assert "channel_not_found" in answer["permissionDecisionReason"]
    assert f"channel {NOWHERE} does not exist" in answer["permissionDecisionReason"]
    assert proxy.seen(POLLS) <= 2
