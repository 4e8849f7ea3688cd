"""`signoff serve` as an operator meets it: every start-up problem is one line naming the setting and
what to do, exit code 2, no traceback; nothing starts before the checks pass; a Slack outage at start
is a WARNING, not a reason to stay down."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import aiohttp

from tests.process.cli import API_TOKEN, BOT_TOKEN, SIGNING_SECRET, assert_one_line, clean_env, signoff
from bot.sandbox import SlackEmulator
from bench.harness import free_port
from tests.support.process import LoggedProcess


def serve_env(slack: SlackEmulator, db_url: str, port: int, **extra: str) -> dict[str, str]:
    return clean_env(**{"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                        "SLACK_API_URL": slack.url, "DATABASE_URL": db_url, "PORT": str(port),
                        "SIGNOFF_HOST": "127.0.0.1", "SIGNOFF_API_TOKENS": API_TOKEN, **extra})


def server(env: dict[str, str], cwd: Path) -> LoggedProcess:
    """`signoff serve` in the background with exactly `env`, its output read line by line."""
    return LoggedProcess([sys.executable, "-m", "bot", "serve"], env, cwd, cwd / "serve.log")


async def test_port_in_use_is_one_line_before_anything_starts(slack: SlackEmulator, db_url: str, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = await signoff("serve", env=serve_env(slack, db_url, port), cwd=tmp_path)
    assert_one_line(done, f"signoff: PORT {port} on 127.0.0.1 is already in use: stop the other server or set PORT "
                          "to a free port")
    assert slack.calls == []  # nothing was started, not even a call to Slack


async def test_bad_host_is_one_line(slack: SlackEmulator, db_url: str, tmp_path: Path) -> None:
    env = serve_env(slack, db_url, free_port(), SIGNOFF_HOST="192.0.2.1")  # TEST-NET: never this machine's
    done = await signoff("serve", env=env, cwd=tmp_path)
    assert_one_line(done, "signoff: SIGNOFF_HOST='192.0.2.1' is not an address of this machine: use 0.0.0.0 or "
                          "127.0.0.1")


async def test_invalid_auth_at_start_up_is_fatal_and_says_what_to_do(slack: SlackEmulator, db_url: str,
                                                                      tmp_path: Path) -> None:
    env = serve_env(slack, db_url, free_port(), SLACK_BOT_TOKEN="xoxb-revoked-long-ago")
    done = await signoff("serve", env=env, cwd=tmp_path)
    assert_one_line(done, "signoff: SLACK_BOT_TOKEN: Slack refused it (invalid_auth): SLACK_BOT_TOKEN is not a "
                          "valid bot token: copy the Bot User OAuth Token (xoxb-...) from OAuth & Permissions at "
                          "https://api.slack.com/apps, set SLACK_BOT_TOKEN and restart")
    assert [c.method for c in slack.calls] == ["auth.test"]


async def test_socket_mode_with_a_bad_app_token_is_one_line(slack: SlackEmulator, db_url: str, tmp_path: Path) -> None:
    env = serve_env(slack, db_url, free_port(), SLACK_APP_TOKEN="xapp-not-this-one")
    done = await signoff("serve", env=env, cwd=tmp_path)
    assert_one_line(done, "signoff: SLACK_APP_TOKEN: Slack refused it (invalid_auth): create an app-level token "
                          "with the connections:write scope under Basic Information > App-Level Tokens, set "
                          "SLACK_APP_TOKEN to it (xapp-...), or unset SLACK_APP_TOKEN to serve Slack over HTTP")


async def test_check_runs_the_checks_and_exits(slack: SlackEmulator, db_url: str, tmp_path: Path) -> None:
    port = free_port()
    done = await signoff("serve", "--check", env=serve_env(slack, db_url, port), cwd=tmp_path)
    assert done.code == 0, done.stderr
    where = "sqlite " + str(Path(db_url.removeprefix("sqlite:///")).resolve()) if db_url.startswith("sqlite") else ""
    lines = done.stdout.splitlines()
    assert lines[0] == f"ok: PORT {port} on 127.0.0.1 is free"
    assert lines[1].startswith("ok: database ") and lines[1].endswith(" is reachable and up to date")
    assert where in lines[1]
    assert lines[2] == "ok: Slack: HTTP (Slack sends to /slack/events), workspace 'Fake Team' as @signoff"
    assert done.events("error") == [] and done.events("warning") == []
    bad = await signoff("serve", "--check", env=serve_env(slack, db_url, port, SLACK_BOT_TOKEN="xoxb-nope"),
                        cwd=tmp_path)
    assert bad.code == 2 and bad.plain[-1].startswith("signoff: SLACK_BOT_TOKEN: Slack refused it (invalid_auth)")


async def test_start_up_line_then_sigterm_says_what_it_drains(slack: SlackEmulator, db_url: str, tmp_path: Path) -> None:
    port = free_port()
    async with server(serve_env(slack, db_url, port), tmp_path) as serving:
        line = await serving.line('"serving on ')
        assert f"serving on http://127.0.0.1:{port} (database: " in line
        assert "Slack: HTTP (Slack sends to /slack/events), workspace 'Fake Team' as @signoff)" in line
        async with aiohttp.ClientSession() as session, session.get(
                f"http://127.0.0.1:{port}/healthz", headers={"Authorization": f"Bearer {API_TOKEN}"}) as resp:
            health = await resp.json()
        assert health["slack"]["state"] == "ok" and health["slack"]["team"] == "Fake Team"
        assert await serving.terminate() == 0
    assert any('"event": "SIGTERM: stopping; finishing 0 acked Slack request(s) or note(s) still being handled, '
               '0 click(s) in the backlog, 0 outbox deliver(ies) in flight' in line for line in serving.lines()), serving.lines()
    assert '"event": "stopped"' in serving.lines()[-1]
    assert not any("Traceback" in line for line in serving.lines()), [t for t in serving.lines() if "Traceback" in t]


async def test_slack_down_at_start_up_serves_warns_once_and_retries(slack: SlackEmulator, db_url: str,
                                                                    tmp_path: Path) -> None:
    slack.fail("auth.test", status=503, times=2)
    port = free_port()
    async with server(serve_env(slack, db_url, port), tmp_path) as serving:
        await serving.line('"serving on ')
        warning = await serving.line("Slack did not answer auth.test")
        assert '"level": "warning"' in warning and "auth.test: HTTP 503" in warning
        # The agent API is up meanwhile, and a request made now is delivered.
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {API_TOKEN}"}) as session:
            async with session.post(f"http://127.0.0.1:{port}/api/v1/approvals", json={
                "action": {"name": "x", "params": {}}, "summary": "made while Slack was down", "channel": "C1",
            }) as resp:
                assert resp.status == 201
                made = await resp.json()
            recovered = await serving.line("Slack answers: workspace 'Fake Team' as @signoff")
            assert '"level": "info"' in recovered
            async with session.get(f"http://127.0.0.1:{port}/api/v1/approvals/{made['id']}") as resp:
                body = await resp.json()
        await slack.wait_for("chat.postMessage", ok_only=True)
        assert sum("Slack did not answer" in line for line in serving.lines()) == 1
        assert body["id"] == made["id"]
        assert await serving.terminate() == 0


async def test_placeholders_and_a_closed_agent_api_are_noted(slack: SlackEmulator, db_url: str, tmp_path: Path) -> None:
    env = serve_env(slack, db_url, free_port(), SLACK_BOT_TOKEN="xoxb-your-bot-token",
                    SLACK_SIGNING_SECRET="your-signing-secret", SIGNOFF_API_TOKENS="")
    readme = serve_env(slack, db_url, free_port(), SIGNOFF_API_TOKENS="choose-a-long-random-token")
    (tmp_path / ".env").write_text("SIGNOFF_TIMOUT=4h\n")
    async with server(env, tmp_path) as serving:
        await serving.line('"serving on ')
        assert "SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET still hold placeholder values" in (
            await serving.line("placeholder values"))
        assert "set it to one or more comma-separated tokens" in await serving.line("the agent API is closed")
        assert '"SIGNOFF_TIMOUT is not a Signoff setting: did you mean SIGNOFF_TIMEOUT?"' in (
            await serving.line("SIGNOFF_TIMOUT"))
        await serving.terminate()
    assert slack.calls_to("auth.test") == []  # a placeholder token is not sent to Slack
    async with server(readme, tmp_path) as serving:
        assert "choose a long random token of your own" in await serving.line("README's example token")
        await serving.terminate()
