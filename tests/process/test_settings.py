"""Settings: read once from an injectable mapping; every bad value stops the start with one line naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.process.settings import Settings, SettingsError, database_url_from_env
from storage.urls import async_url
from tests.support.app import ROOT

GOOD = {"SLACK_BOT_TOKEN": "xoxb-1-abc", "SLACK_SIGNING_SECRET": "s3cret"}


def load(**env: str) -> Settings:
    return Settings.from_env({**GOOD, **env}, dotenv=None)


def refused(env: dict[str, str]) -> str:
    with pytest.raises(SettingsError) as info:
        Settings.from_env(env, dotenv=None)
    message = str(info.value)
    assert "\n" not in message and message.strip() == message and message, repr(message)
    return message


def test_minimal_settings_and_defaults() -> None:
    settings = load()
    assert settings.slack_bot_token == "xoxb-1-abc" and settings.slack_signing_secret == "s3cret"
    assert settings.slack_api_url == "https://slack.com/api/"
    assert settings.database_url == "sqlite:///signoff.db" and settings.is_sqlite
    assert settings.port == 3000 and settings.api_tokens == () and settings.webhook_secret is None
    assert settings.socket_mode is False and settings.webhook_max_attempts == 200


def test_values_are_parsed() -> None:
    settings = load(
        SLACK_APP_TOKEN="xapp-1-xyz", SLACK_API_URL="http://127.0.0.1:9/api", PORT=" 8080 ",
        SIGNOFF_API_TOKENS=" token-one-1 , ,token-two-2 ", SIGNOFF_WEBHOOK_SECRET="whs",
        SIGNOFF_DEFAULT_CHANNEL="C0123ABCD", SIGNOFF_OUTBOX_SWEEP_SECONDS="0.5", SIGNOFF_WEBHOOK_MAX_ATTEMPTS="3",
        SIGNOFF_LOG_LEVEL="debug", ANTHROPIC_BASE_URL="http://127.0.0.1:8/",
    )
    assert settings.socket_mode and settings.slack_api_url == "http://127.0.0.1:9/api/"
    assert settings.port == 8080 and settings.api_tokens == ("token-one-1", "token-two-2")
    assert settings.default_channel == "C0123ABCD" and settings.outbox_sweep_seconds == 0.5
    assert settings.webhook_max_attempts == 3 and settings.log_level == "DEBUG"
    # Socket Mode needs no signing secret.
    assert Settings.from_env({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}, dotenv=None).socket_mode


# (variable, value or None to leave it out)
BAD: list[tuple[str, str | None]] = [
    ("SLACK_BOT_TOKEN", None),
    ("SLACK_BOT_TOKEN", ""),
    ("SLACK_BOT_TOKEN", "   "),
    ("SLACK_BOT_TOKEN", "xoxp-user-token"),
    ("SLACK_SIGNING_SECRET", None),
    ("SLACK_SIGNING_SECRET", " "),
    ("SLACK_APP_TOKEN", "xoxb-not-an-app-token"),
    ("SLACK_API_URL", "slack.com/api"),
    ("SLACK_API_URL", "ftp://slack.com/api/"),
    ("DATABASE_URL", "mysql://u:p@localhost/db"),
    ("DATABASE_URL", "not a url"),
    ("DATABASE_URL", "sqlite://"),
    ("DATABASE_URL", "sqlite:///:memory:"),
    ("DATABASE_URL", "postgres://user@host:notaport/db"),
    ("PORT", "http"),
    ("PORT", "70000"),
    ("PORT", "-1"),
    ("PORT", "80.5"),
    ("SIGNOFF_API_TOKENS", "short"),
    ("SIGNOFF_API_TOKENS", "long-enough-1,tiny"),
    ("SIGNOFF_POLICY", "/no/such/policy.yml"),
    ("ANTHROPIC_BASE_URL", "api.anthropic.com"),
    ("SIGNOFF_DEFAULT_CHANNEL", "#approvals"),
    ("SIGNOFF_DEFAULT_CHANNEL", "general"),
    ("SIGNOFF_DEFAULT_CHANNEL", "C0 12"),
    ("SIGNOFF_DEFAULT_CHANNEL", "Cgeneral"),
    ("SIGNOFF_LOG_LEVEL", "verbose"),
    ("SIGNOFF_OUTBOX_SWEEP_SECONDS", "soon"),
    ("SIGNOFF_OUTBOX_SWEEP_SECONDS", "0"),
    ("SIGNOFF_OUTBOX_SWEEP_SECONDS", "nan"),
    ("SIGNOFF_WEBHOOK_MAX_ATTEMPTS", "0"),
    ("SIGNOFF_WEBHOOK_MAX_ATTEMPTS", "many"),
    ("SIGNOFF_WEBHOOK_MAX_ATTEMPTS", "2.5"),
]


@pytest.mark.parametrize(("name", "value"), BAD, ids=[f"{n}={v!r}" for n, v in BAD])
def test_each_bad_setting_is_one_line_naming_it(name: str, value: str | None) -> None:
    env: dict[str, Any] = dict(GOOD)
    env.pop(name, None)
    if value is not None:
        env[name] = value
    message = refused(env)
    assert name in message, message


def test_a_value_with_a_newline_still_makes_one_line() -> None:
    message = refused({**GOOD, "SLACK_API_URL": "nope\nsecond line"})
    assert "SLACK_API_URL" in message


def test_secrets_are_not_echoed() -> None:
    message = refused({**GOOD, "SLACK_BOT_TOKEN": "xoxp-very-secret-user-token"})
    assert "very-secret" not in message
    message = refused({**GOOD, "SIGNOFF_API_TOKENS": "abc"})
    assert "abc" not in message.replace("SIGNOFF_API_TOKENS", "")


@pytest.mark.parametrize("scheme", ["postgres", "postgresql"])
def test_postgres_urls_are_accepted_and_converted(scheme: str) -> None:
    raw = f"{scheme}://user:pa%40ss@db.example.com:5433/signoff?sslmode=require"
    settings = load(DATABASE_URL=raw)
    assert settings.database_url == raw and not settings.is_sqlite
    url = async_url(settings.database_url)
    assert url.drivername == "postgresql+asyncpg"
    assert url.get_backend_name() == "postgresql" and url.get_driver_name() == "asyncpg"
    assert dict(url.query) == {"ssl": "require"}
    assert (url.username, url.password, url.host, url.port, url.database) == (
        "user", "pa@ss", "db.example.com", 5433, "signoff")
    assert database_url_from_env({"DATABASE_URL": raw}, dotenv=None) == raw


def test_postgres_url_without_sslmode_keeps_its_query() -> None:
    url = async_url("postgres://u@h/db?application_name=signoff")
    assert url.drivername == "postgresql+asyncpg" and dict(url.query) == {"application_name": "signoff"}


def test_sqlite_urls() -> None:
    assert async_url("sqlite:///data/signoff.db").drivername == "sqlite+aiosqlite"
    assert load(DATABASE_URL="sqlite:////var/lib/signoff.db").is_sqlite


def test_database_url_alone_for_db_upgrade() -> None:
    assert database_url_from_env({}, dotenv=None) == "sqlite:///signoff.db"
    with pytest.raises(SettingsError, match="DATABASE_URL"):
        database_url_from_env({"DATABASE_URL": "mysql://x/y"}, dotenv=None)


def test_dotenv_is_read_and_the_environment_wins(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("SLACK_BOT_TOKEN=xoxb-from-dotenv\nSLACK_SIGNING_SECRET=dot\nPORT=4000\n")
    settings = Settings.from_env({"PORT": "5000"}, dotenv=dotenv)
    assert (settings.slack_bot_token, settings.slack_signing_secret, settings.port) == (
        "xoxb-from-dotenv", "dot", 5000)
    assert Settings.from_env(GOOD, dotenv=tmp_path / "missing.env").port == 3000


def test_serve_without_bot_token_exits_2_with_one_line(tmp_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "SLACK_SIGNING_SECRET": "s"}
    done = subprocess.run([sys.executable, "-m", "bot", "serve"], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "SLACK_BOT_TOKEN" in lines[0] and lines[0].startswith("signoff: ")
    assert done.stdout == ""


def test_serve_with_a_bad_database_url_exits_2_with_one_line(tmp_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), **GOOD, "DATABASE_URL": "mysql://x/y"}
    done = subprocess.run([sys.executable, "-m", "bot", "serve"], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and "DATABASE_URL" in done.stderr
