"""`signoff hook claude-code` run as Claude Code runs it (a process, JSON on stdin, JSON on stdout) with
an `agent`-scoped token (issue 33, items 5, 9 and 10).

- A call's request is found again by its key only through the token that made it: the hook's
  conflict fallback and `signoff wait --claude-result` work for `agent` tokens.
- An approval is for one call: a call without a call id asks every time.
- The transcript is read bounded: a FIFO or a huge file never holds the hook past its timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
from pathlib import Path
from typing import Any

import pytest

from tests.support.app import ROOT, App
from tests.client.claude_cli import signoff_command
from tests.client.helpers import cards, cards_once_posted, next_pending, pending_id

AGENT, OPS = "tok-claude-agent-1", "tok-claude-ops-2"
SESSION = "6f1c2d9e-8a0b-4c57-9d3e-2b1f0a7c5e11"
ANSWER_WITHIN = 60.0  # the subprocess timeout: a hook that has not answered by then has hung
MEMORY_CAP = 3 << 30  # address space of the hook process: a read of a huge file fails fast, not the machine


pytestmark = pytest.mark.settings(token=OPS,  # the test's own reads see every token's requests
                                  SIGNOFF_API_TOKENS=f"claude-agent:{AGENT}:agent,ops:{OPS}:admin")


def env(app: App) -> dict[str, str]:
    return {**os.environ, "SIGNOFF_URL": app.url, "SIGNOFF_TOKEN": AGENT, "SIGNOFF_CHANNEL": "C1",
            "SIGNOFF_APPROVERS": "U1", "PYTHONPATH": str(ROOT)}


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


async def run(app: App, argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    """A `signoff` command as a process; (exit code, stdout, stderr). Fails the test if it hangs."""
    proc = await asyncio.create_subprocess_exec(
        *signoff_command().split(), *argv, env=env(app), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, preexec_fn=_cap_memory)
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), ANSWER_WITHIN)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"`signoff {' '.join(argv)}` gave no answer within {ANSWER_WITHIN:g}s") from None
    return proc.returncode or 0, out.decode(), err.decode()


async def hook(app: App, payload: dict[str, Any], *args: str) -> tuple[str, str]:
    """The hook's (decision, reason), whichever event's shape it answered in."""
    code, out, err = await run(app, ["hook", "claude-code", *args], json.dumps(payload))
    assert code == 0, err
    answer = json.loads(out)["hookSpecificOutput"]
    if answer["hookEventName"] == "PermissionRequest":
        decision = answer["decision"]
        return decision["behavior"], decision.get("message", "")
    return answer["permissionDecision"], answer["permissionDecisionReason"]


def pre_tool_use(tool_input: dict[str, Any], tool_use_id: str | None, transcript: Path | None = None,
                 event: str = "PreToolUse", tool: str = "Write") -> dict[str, Any]:
    payload: dict[str, Any] = {"session_id": SESSION, "cwd": "/home/dev/acme", "permission_mode": "default",
                               "hook_event_name": event, "tool_name": tool, "tool_input": tool_input}
    if tool_use_id is not None:
        payload["tool_use_id"] = tool_use_id
    if transcript is not None:
        payload["transcript_path"] = str(transcript)
    return payload


def assistant(message_id: str, *uses: tuple[str, str, dict[str, Any]]) -> str:
    content = [{"type": "tool_use", "id": i, "name": n, "input": inp} for i, n, inp in uses]
    return json.dumps({"type": "assistant", "message": {"id": message_id, "role": "assistant", "content": content}})


def result_of(tool_use_id: str) -> str:
    return json.dumps({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": tool_use_id, "content": "ok"}]}})


async def stored_key(app: App, request_id: str) -> str:
    assert app.signoff is not None
    stored = await app.signoff.store.get_request(request_id)
    assert stored is not None
    return str(stored.idempotency_key)


# -- item 5: lookups by key, for an agent token ------------------------------------------------------


async def test_the_conflict_fallback_finds_the_agent_tokens_own_request(app: App, tmp_path: Path) -> None:
    target = tmp_path / "release.txt"
    target.write_text("v1\n")
    call = pre_tool_use({"file_path": str(target), "content": "v2\n"}, "toolu_conflict_1")
    decision, reason = await hook(app, call, "--wait", "0.3")
    assert decision == "deny" and "still waiting" in reason, reason
    request_id = await pending_id(app)
    # The file changes meanwhile: the same call now makes another card body under the same key (409),
    # and the hook answers from the request it made first, which it finds by that key. That approval was
    # made on the old file (issue 37), so the person is asked again, once, with the new preview.
    target.write_text("v1, edited by hand\n")
    again = asyncio.create_task(hook(app, call, "--wait", "30"))
    await app.click(request_id, "U1", user_name="alice")
    second = await next_pending(app, request_id)
    await app.click(second, "U1", user_name="alice")
    decision, reason = await again
    assert decision == "allow" and second in reason, reason
    _, listing = await app.api("GET", "/api/v1/approvals")
    assert [i["id"] for i in listing["items"]] == [request_id, second] and cards(app.slack) == 2


async def test_signoff_wait_claude_result_finds_the_deferred_call(app: App, tmp_path: Path) -> None:
    tool_input = {"file_path": str(tmp_path / "notes.txt"), "content": "x\n"}
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(assistant("msg_1", ("toolu_defer_1", "Write", tool_input)) + "\n")
    decision, reason = await hook(app, pre_tool_use(tool_input, "toolu_defer_1", transcript),
                                  "--wait", "0.3", "--on-timeout", "defer")
    assert decision == "defer", reason
    result = tmp_path / "run.json"  # what `claude -p --output-format json` printed for the deferred run
    result.write_text(json.dumps({"type": "result", "session_id": SESSION, "terminal_reason": "tool_deferred",
                                  "deferred_tool_use": {"id": "toolu_defer_1", "name": "Write",
                                                        "input": tool_input}}))
    waiting = asyncio.create_task(run(app, ["wait", "--claude-result", str(result), "--timeout", "30"]))
    request_id = await pending_id(app)
    await app.click(request_id, "U1", user_name="alice")
    code, out, err = await waiting
    assert code == 0, err
    assert json.loads(out)["outcome"] == "approved" and json.loads(out)["id"] == request_id


# -- item 9: an approval is for one call -------------------------------------------------------------


def no_call_id(tmp_path: Path, variant: str) -> dict[str, Any]:
    command = {"command": "rm -rf build/ dist/", "description": "Remove build artifacts"}
    if variant == "pre-tool-use without tool_use_id":
        return pre_tool_use(command, None, tool="Bash")
    if variant == "permission request, transcript missing":
        return pre_tool_use(command, None, tmp_path / "missing.jsonl", event="PermissionRequest", tool="Bash")
    # The only call like it in the transcript already ran: it is not the call being asked about.
    transcript = tmp_path / "ran.jsonl"
    transcript.write_text("\n".join([assistant("msg_1", ("toolu_ran", "Bash", command)), result_of("toolu_ran")])
                          + "\n")
    return pre_tool_use(command, None, transcript, event="PermissionRequest", tool="Bash")


@pytest.mark.parametrize("variant", ["pre-tool-use without tool_use_id", "permission request, transcript missing",
                                     "permission request, the like call already ran"])
async def test_a_call_without_a_call_id_asks_every_time(app: App, tmp_path: Path, variant: str) -> None:
    call = no_call_id(tmp_path, variant)
    first = asyncio.create_task(hook(app, call, "--wait", "30"))
    request_id = await pending_id(app)
    await app.click(request_id, "U1", user_name="alice")
    decision, reason = await first
    assert decision == "allow", reason
    # The same command later: a new card, never the earlier approval.
    decision, reason = await hook(app, call, "--wait", "0.3")
    assert decision == "deny" and "still waiting" in reason, reason
    _, listing = await app.api("GET", "/api/v1/approvals")
    assert len(listing["items"]) == 2
    assert await cards_once_posted(app, *[i["id"] for i in listing["items"]]) == 2  # the second posts after its answer


async def test_the_one_open_call_in_the_transcript_names_the_request(app: App, tmp_path: Path) -> None:
    command = {"command": "npm publish"}
    transcript = tmp_path / "open.jsonl"
    transcript.write_text("\n".join([assistant("msg_1", ("toolu_old", "Bash", command)), result_of("toolu_old"),
                                     assistant("msg_2", ("toolu_now", "Bash", command))]) + "\n")
    call = pre_tool_use(command, None, transcript, event="PermissionRequest", tool="Bash")
    for _ in range(2):  # asked twice for the same open call: one request
        decision, reason = await hook(app, call, "--wait", "0.3")
        assert decision == "deny" and "still waiting" in reason, reason
    request_id = await pending_id(app)
    assert (await stored_key(app, request_id)).endswith(f":{SESSION}:toolu_now")


# -- item 10: the transcript is read bounded ---------------------------------------------------------


@pytest.mark.parametrize("event", ["PermissionRequest", "PreToolUse"])
async def test_a_fifo_transcript_does_not_hold_the_hook(app: App, tmp_path: Path, event: str) -> None:
    fifo = tmp_path / "transcript.jsonl"
    os.mkfifo(fifo)  # nobody ever writes to it
    tool_input = {"file_path": str(tmp_path / "a.txt"), "content": "a\n"}
    if event == "PermissionRequest":  # read to find the call's id
        decision, reason = await hook(app, pre_tool_use(tool_input, None, fifo, event=event), "--wait", "0.3")
        assert decision == "deny" and "still waiting" in reason, reason
    else:  # read to count the turn's calls before deferring
        decision, reason = await hook(app, pre_tool_use(tool_input, "toolu_fifo", fifo), "--wait", "0.3",
                                      "--on-timeout", "defer")
        assert decision == "deny" and "cannot tell how many tool calls" in reason, reason


@pytest.mark.parametrize("event", ["PermissionRequest", "PreToolUse"])
async def test_a_huge_transcript_is_read_from_its_tail(app: App, tmp_path: Path, event: str) -> None:
    tool_input = {"file_path": str(tmp_path / "b.txt"), "content": "b\n"}
    transcript = tmp_path / "huge.jsonl"
    with transcript.open("wb") as handle:
        handle.truncate(16 << 30)  # 16 GiB of holes, no newline, before the newest entries
        handle.seek(0, os.SEEK_END)
        handle.write(("\n" + "\n".join([assistant("msg_1", ("toolu_before", "Read", {"file_path": "x"})),
                                        result_of("toolu_before"),
                                        assistant("msg_2", ("toolu_huge", "Write", tool_input))]) + "\n").encode())
    if event == "PermissionRequest":
        decision, reason = await hook(app, pre_tool_use(tool_input, None, transcript, event=event), "--wait", "0.3")
        assert decision == "deny" and "still waiting" in reason, reason
        assert (await stored_key(app, await pending_id(app))).endswith(":toolu_huge")
    else:
        decision, reason = await hook(app, pre_tool_use(tool_input, "toolu_huge", transcript), "--wait", "0.3",
                                      "--on-timeout", "defer")
        assert decision == "defer", reason
