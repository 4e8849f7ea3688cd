"""`signoff demo`'s server without a browser: the page, its live updates, and what it refuses."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest_asyncio

from bot.sandbox.demo import APPROVER, CHANNEL, Demo, banner, start_demo
from bench.harness import free_port


@pytest_asyncio.fixture
async def demo() -> AsyncIterator[Demo]:
    running = await start_demo(free_port(), {}, agent=False, token="test-token-" + "x" * 12)  # --no-agent: quiet
    try:
        yield running
    finally:
        await running.stop()


async def test_a_quiet_sandbox_serves_the_page_and_says_where_everything_is(demo: Demo) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(demo.url + "/") as resp:
            page = await resp.text()
        async with http.get(demo.url + "/healthz", headers={"Authorization": f"Bearer {demo.api_token}"}) as resp:
            assert resp.status == 200  # an agent token: the details are an admin's (the sandbox hands out none)
    assert resp.status == 200 and "Alice Approver (approver)" in page and "No messages yet." in page
    text = banner(demo)
    assert demo.url in text and demo.api_token in text and str(demo.database) in text
    assert "Agent:     none (--no-agent)" in text and f"Policy:    {demo.policy} (the sandbox's" in text
    assert "Webhooks:  off (a callback_url is refused); to try them, start with SIGNOFF_WEBHOOK_SECRET=" in text


def hook_call(command: str, n: int) -> dict[str, object]:
    return {"session_id": "s-demo", "transcript_path": "/tmp/s-demo.jsonl", "cwd": "/tmp", "permission_mode": "default",
            "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": command},
            "tool_use_id": f"toolu_{n}"}


async def test_the_sandbox_policy_lets_a_read_only_command_through_and_asks_about_the_rest(demo: Demo) -> None:
    """What a policy is for, shown with none of the user's own: Claude Code's HTTP hook, as it calls."""
    auth = {"Authorization": f"Bearer {demo.api_token}"}
    said_of = {}
    async with aiohttp.ClientSession() as http:
        for n, command in enumerate((*ALLOWED, *ASKED)):
            async with http.post(demo.url + "/api/v1/hooks/claude-code?wait=0", json=hook_call(command, n),
                                 headers=auth) as resp:
                said_of[command] = (await resp.json())["hookSpecificOutput"]
        async with http.get(demo.url + "/api/v1/approvals?limit=100", headers=auth) as resp:
            stored = (await resp.json())["items"]
    for command in ALLOWED:
        assert said_of[command]["permissionDecision"] == "allow", said_of[command]
        assert "Approved by Signoff's policy" in said_of[command]["permissionDecisionReason"]
    for command in ASKED:
        assert said_of[command]["permissionDecision"] != "allow", (command, said_of[command])
    by_status: dict[str, set[str]] = {}
    for item in stored:
        by_status.setdefault(item["status"], set()).add(item["action"]["params"]["command"])
    assert by_status == {"approved": set(ALLOWED), "pending": set(ASKED)}, by_status  # the asked ones have cards


# A read-only command passes; what could write, run something else, never end or read a device asks.
ALLOWED = ("ls -la", "cat notes.md", "head -n 5 src/app.py", "wc -l notes.md", "echo hello", "pwd")
ASKED = ("cat notes.md; rm -rf build", "ls\nrm -rf build", "echo $(rm -rf build)", "rm -rf build",
         "git log -1 --output=.git/config", "git diff --output=notes.md", "git status", "cat /dev/zero",
         "head -c 9G /dev/urandom", "cat /proc/self/environ", "echo {1..99999999}", "ls /*/*", "tail -f notes.md",
         "echo x > notes.md", "cat `rm -rf build`")


async def test_a_policy_of_ones_own_replaces_the_sandboxs() -> None:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        mine = Path(tmp) / "mine.yaml"
        mine.write_text("rules:\n  - name: nothing-passes\n    tool: Bash\n    effect: deny\n", encoding="utf-8")
        running = await start_demo(free_port(), {"SIGNOFF_POLICY": str(mine), "SIGNOFF_WEBHOOK_SECRET": "s3cret",
                                                 "SIGNOFF_EGRESS_ALLOW": "127.0.0.1"}, agent=False,
                                   token="test-token-" + "y" * 12)
        try:
            assert running.policy == mine and f"Policy:    {mine}\n" in banner(running)
            assert "Webhooks:  signed with SIGNOFF_WEBHOOK_SECRET; also to 127.0.0.1 (SIGNOFF_EGRESS_ALLOW)" in banner(running)
            async with aiohttp.ClientSession() as http:
                async with http.post(running.url + "/api/v1/hooks/claude-code?wait=0", json=hook_call("ls", 1),
                                     headers={"Authorization": f"Bearer {running.api_token}"}) as resp:
                    said = (await resp.json())["hookSpecificOutput"]
            assert said["permissionDecision"] == "deny" and "nothing-passes" in said["permissionDecisionReason"]
        finally:
            await running.stop()


async def test_live_updates_are_pushed_and_a_slash_command_is_answered_only_to_its_author(demo: Demo) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(demo.url + "/sandbox/events") as events:
            assert await events.content.readline() == b"retry: 1000\n"
            await events.content.readline(), await events.content.readline()  # the hello event
            act = {"kind": "message", "user": APPROVER, "channel": CHANNEL, "text": "/signoff pending"}
            async with http.post(demo.url + "/sandbox/act", json=act) as resp:
                assert resp.status == 200 and (await resp.json())["status"] == 200
            line = await asyncio.wait_for(events.content.readline(), 10)
            assert line == b"data: changed\n"
        async with http.get(demo.url + "/sandbox/pane", params={"user": APPROVER}) as resp:
            mine = (await resp.json())["main"]
        async with http.get(demo.url + "/sandbox/pane", params={"user": "UOSCAR"}) as resp:
            theirs = (await resp.json())["main"]
    assert "Only visible to you" in mine and "Waiting for you" in mine
    assert "Only visible to you" not in theirs


async def test_the_page_refuses_what_names_nobody_or_nothing(demo: Demo) -> None:
    async with aiohttp.ClientSession() as http:
        for act in ({"kind": "message", "user": "UNOBODY", "channel": CHANNEL, "text": "hi"},
                    {"kind": "action", "user": APPROVER, "channel": CHANNEL, "ts": "1.0", "action_id": "x"},
                    {"kind": "submit", "user": APPROVER, "view_id": "VNOPE"},
                    {"kind": "dance", "user": APPROVER}):
            async with http.post(demo.url + "/sandbox/act", json=act) as resp:
                assert resp.status == 400 and (await resp.json())["error"], act
        async with http.get(demo.url + "/sandbox/pane", params={"user": "UNOBODY"}) as resp:
            assert resp.status == 400


async def test_a_typed_at_name_reaches_the_bot_as_slack_sends_it(demo: Demo) -> None:
    """/signoff is registered with should_escape: the page, like Slack, turns @morgan into <@UMORGAN|morgan>."""
    async with aiohttp.ClientSession() as http:
        act = {"kind": "message", "user": APPROVER, "channel": CHANNEL, "text": "/signoff away to @morgan"}
        async with http.post(demo.url + "/sandbox/act", json=act) as resp:
            assert resp.status == 200 and (await resp.json())["status"] == 200
        async with http.get(demo.url + "/sandbox/pane", params={"user": APPROVER}) as resp:
            mine = (await resp.json())["main"]
    assert "also go to" in mine and "cannot tell who" not in mine, mine


def said(demo: Demo, text: str) -> bool:
    assert demo.client.fake is not None
    return any(text in (m.text or "") for m in demo.client.fake.messages.values())


async def test_the_sandbox_refuses_other_hosts_and_writes_from_other_sites(demo: Demo) -> None:
    """DNS rebinding (a foreign name for 127.0.0.1) and a cross-site form post would act as any sandbox person."""
    act = {"kind": "message", "user": APPROVER, "channel": CHANNEL, "text": "posted by another site"}
    body = json.dumps(act)
    port = demo.url.rsplit(":", 1)[1]
    refused = [
        {"Host": f"rebound.attacker.example:{port}"},  # DNS rebinding: the page's own origin, a foreign name
        {"Origin": "https://attacker.example", "Content-Type": "text/plain"},  # <form enctype="text/plain">
        {"Origin": "null", "Content-Type": "text/plain"},  # a sandboxed frame's post
        {"Sec-Fetch-Site": "cross-site", "Content-Type": "application/x-www-form-urlencoded"},
        {"Sec-Fetch-Site": "same-site", "Origin": f"http://other.localhost:{port}"},
    ]
    async with aiohttp.ClientSession() as http:
        for headers in refused:
            async with http.post(demo.url + "/sandbox/act", data=body, headers=headers) as resp:
                assert resp.status == 403 and (await resp.json())["error"]["code"] == "forbidden", headers
        for path in ("/", "/sandbox/slack/api/auth.test", "/healthz"):  # reads too, with a foreign Host
            async with http.get(demo.url + path, headers={"Host": f"attacker.example:{port}"}) as resp:
                assert resp.status == 403, path
        assert not said(demo, "posted by another site")
        # The page itself (a browser's same-origin fetch), localhost and plain clients still work.
        for headers in ({"Origin": demo.url, "Sec-Fetch-Site": "same-origin"},
                        {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"}, {}):
            async with http.post(demo.url + "/sandbox/act", json=act, headers=headers) as resp:
                assert resp.status == 200, headers
        async with http.get(demo.url + "/", headers={"Host": f"[::1]:{port}"}) as resp:
            assert resp.status == 200
    assert said(demo, "posted by another site")
