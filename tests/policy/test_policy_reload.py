"""SIGHUP reloads the policy file of a real `signoff serve` process; a bad file keeps the policy in
force, and the log and GET /api/v1/policy say why (file, line, problem)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import aiohttp

from bot.sandbox import SlackEmulator
from tests.support.app import API_TOKEN, approval_body
from tests.support.process import ServerProcess
from tests.support import waits

ONE_RULE = """\
rules:
  - name: reads
    tool: read_file
    effect: allow
    tier: low
"""
TWO_RULES = ONE_RULE + """\
  - name: no-deletes
    tool: delete_file
    effect: deny
"""
BAD = TWO_RULES + """\
  - name: broken
    tool: x
    params: {path: {regex: "([unclosed"}}
    effect: deny
"""
HEADERS = {"Authorization": f"Bearer {API_TOKEN}"}


async def policy_status(session: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with session.get(url + "/api/v1/policy", headers=HEADERS) as resp:
        assert resp.status == 200
        return dict(await resp.json())


async def until(session: aiohttp.ClientSession, url: str, check: Any) -> dict[str, Any]:
    """Wait (test-side) until the server's policy status satisfies `check`."""
    async def changed() -> dict[str, Any] | None:
        status = await policy_status(session, url)
        return status if check(status) else None

    return await waits.until(changed, "the server's policy status to change")


async def submit(session: aiohttp.ClientSession, url: str, name: str) -> dict[str, Any]:
    body = approval_body(action={"name": name, "params": {"path": "/tmp/a"}}, preview=None)
    async with session.post(url + "/api/v1/approvals", json=body, headers=HEADERS) as resp:
        assert resp.status == 201
        return dict(await resp.json())


async def test_sighup_reloads_and_a_bad_file_keeps_the_old_policy(db_url: str, slack: SlackEmulator,
                                                                   tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(ONE_RULE)
    server = ServerProcess(db_url, slack, SIGNOFF_POLICY=str(path))
    await server.start(tmp_path)
    assert server.proc is not None and server.log_path is not None
    try:
        async with aiohttp.ClientSession() as session:
            first = await policy_status(session, server.url)
            assert first["rules"] == 1 and first["reloads"] == 0
            assert (await submit(session, server.url, "delete_file"))["status"] == "pending"

            path.write_text(TWO_RULES)
            server.proc.send_signal(signal.SIGHUP)
            second = await until(session, server.url, lambda s: s["reloads"] == 1)
            assert second["rules"] == 2 and second["sha256"] != first["sha256"] and second["last_error"] is None
            denied = await submit(session, server.url, "delete_file")
            assert denied["status"] == "rejected" and denied["decision"]["rule"] == "no-deletes"

            path.write_text(BAD)
            server.proc.send_signal(signal.SIGHUP)
            kept = await until(session, server.url, lambda s: s["last_error"] is not None)
            assert kept["rules"] == 2 and kept["sha256"] == second["sha256"] and kept["reloads"] == 1
            assert kept["last_error"].startswith(f"{path}:11: ") and "bad regex" in kept["last_error"]
            # The policy in force is still the old one, and the process still serves.
            assert (await submit(session, server.url, "delete_file"))["status"] == "rejected"
            assert (await submit(session, server.url, "read_file"))["status"] == "approved"
    finally:
        server.stop()
    lines = [json.loads(line) for line in server.log_path.read_text().splitlines() if line.startswith("{")]
    failed = [entry for entry in lines if entry["event"] == "policy reload failed; keeping the policy in force"]
    assert len(failed) == 1 and failed[0]["level"] == "error" and f"{path}:11:" in failed[0]["problem"]
    assert any(entry["event"] == "policy reloaded" for entry in lines)
