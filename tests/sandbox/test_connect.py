"""`signoff demo` as a process, as an engineer connecting an agent meets it: the `export` lines it prints,
the token they carry (a real agent token, the same after a restart, or the one given with --token), and
what it says when it cannot start."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from tests.support.app import ROOT
from tests.sandbox.browser import exported, start_demo


def submit_with(env: dict[str, str]) -> dict[str, object]:
    """POST /api/v1/approvals with nothing but what the printed lines give."""
    body = {"action": {"name": "deploy", "params": {"service": "api"}}, "summary": "Deploy the api",
            "channel": env["SIGNOFF_CHANNEL"], "approvers": ["UALICE"]}
    request = urllib.request.Request(env["SIGNOFF_URL"] + "/api/v1/approvals", data=json.dumps(body).encode(),
                                     method="POST", headers={"Authorization": f"Bearer {env['SIGNOFF_TOKEN']}",
                                                             "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        answer: dict[str, object] = json.loads(resp.read())
    return answer


def test_the_printed_lines_point_an_agent_at_the_sandbox_with_a_token_that_stays(tmp_path: Path) -> None:
    demo = start_demo(tmp_path, "--no-agent")
    try:
        env = exported(demo)
        assert env["SIGNOFF_URL"] == demo.url and env["SIGNOFF_CHANNEL"] == "CAPPROVALS"
        answer = submit_with(env)
        assert answer["status"] == "pending" and answer["channel"] == "CAPPROVALS"
    finally:
        demo.stop()
    kept = tmp_path / "state" / "signoff" / "demo" / "token"
    assert kept.read_text().strip() == env["SIGNOFF_TOKEN"] and str(kept) in demo.printed
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700

    again = start_demo(tmp_path, "--no-agent")  # a restart: the pasted lines still work
    try:
        assert exported(again)["SIGNOFF_TOKEN"] == env["SIGNOFF_TOKEN"]
        assert submit_with({**env, "SIGNOFF_URL": again.url})["status"] == "pending"
    finally:
        again.stop()


def test_a_token_given_with_token_is_the_one_printed_and_accepted(tmp_path: Path) -> None:
    demo = start_demo(tmp_path, "--no-agent", "--token", "my-own-sandbox-token")
    try:
        env = exported(demo)
        assert env["SIGNOFF_TOKEN"] == "my-own-sandbox-token"
        assert submit_with(env)["status"] == "pending"
        try:
            submit_with({**env, "SIGNOFF_TOKEN": "some-other-token"})
            raise AssertionError("another token was accepted")
        except urllib.error.HTTPError as exc:
            assert exc.code == 401
    finally:
        demo.stop()
    assert not (tmp_path / "state" / "signoff" / "demo" / "token").exists()  # nothing kept for a chosen token


def _demo_command(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIGNOFF_", "ANTHROPIC_", "SLACK_"))}
    env.update(PYTHONPATH=str(ROOT), XDG_STATE_HOME=str(tmp / "state"))
    return subprocess.run([sys.executable, "-m", "bot", "demo", *args], cwd=tmp, env=env, capture_output=True,
                          text=True, timeout=60)


def test_a_bad_token_or_a_taken_port_is_one_clear_line(tmp_path: Path) -> None:
    bad = _demo_command(tmp_path, "--token", "two,tokens")
    assert bad.returncode == 2 and "--token must be at least 8" in bad.stderr and "no spaces, commas" in bad.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = _demo_command(tmp_path, "--port", str(port), "--no-agent")
    assert busy.returncode == 2 and f"try --port {port + 1}" in busy.stderr
    assert "Unclosed" not in busy.stderr and busy.stderr.count("\n") == 1, busy.stderr  # the one line, nothing after


def test_a_database_url_without_its_scheme_says_how_to_write_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIGNOFF_", "ANTHROPIC_", "SLACK_", "DATABASE_"))}
    env.update(PYTHONPATH=str(ROOT), DATABASE_URL="signoff.db")
    done = subprocess.run([sys.executable, "-m", "bot", "db", "upgrade"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "write sqlite:///signoff.db" in done.stderr, done.stderr
