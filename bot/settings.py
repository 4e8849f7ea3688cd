"""The one place that reads the environment (and `.env`).

`Settings.from_env()` takes an injectable mapping; a missing or malformed value
raises `SettingsError` whose message is one line naming the variable.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dotenv import dotenv_values

from storage.urls import BadDatabaseURL, async_url

DEFAULT_SLACK_API_URL = "https://slack.com/api/"
DEFAULT_DATABASE_PATH = "signoff.db"


class SettingsError(Exception):
    """A setting is missing or malformed; the message is one line naming it."""


@dataclass(frozen=True)
class Settings:
    slack_bot_token: str
    slack_signing_secret: str | None
    slack_app_token: str | None = None
    slack_api_url: str = DEFAULT_SLACK_API_URL
    database_url: str = f"sqlite:///{DEFAULT_DATABASE_PATH}"
    port: int = 3000
    host: str = "0.0.0.0"
    api_tokens: tuple[str, ...] = ()
    webhook_secret: str | None = None
    policy_path: str | None = None
    anthropic_api_key: str | None = None
    anthropic_base_url: str | None = None
    anthropic_model: str = "claude-sonnet-4-5"
    default_channel: str | None = None
    public_url: str | None = None
    outbox_sweep_seconds: float = 5.0
    outbox_lease_seconds: float = 60.0
    http_timeout_seconds: float = 10.0
    webhook_max_attempts: int = 8
    log_level: str = "INFO"
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def socket_mode(self) -> bool:
        return bool(self.slack_app_token)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, dotenv: str | Path | None = ".env") -> Settings:
        return _parse(_read(environ, dotenv))


def _read(environ: Mapping[str, str] | None, dotenv: str | Path | None) -> dict[str, str]:
    env: dict[str, str] = {}
    if dotenv is not None and Path(dotenv).is_file():
        env.update({k: v for k, v in dotenv_values(dotenv).items() if v is not None})
    env.update(os.environ if environ is None else environ)
    return env


def database_url_from_env(environ: Mapping[str, str] | None = None, *, dotenv: str | Path | None = ".env") -> str:
    """Just DATABASE_URL (for `signoff db upgrade`, which needs no Slack settings)."""
    url = (_read(environ, dotenv).get("DATABASE_URL") or "").strip() or f"sqlite:///{DEFAULT_DATABASE_PATH}"
    try:
        async_url(url)
    except BadDatabaseURL as exc:
        raise SettingsError(str(exc)) from None
    return url


def _parse(env: Mapping[str, str]) -> Settings:
    def get(name: str) -> str | None:
        value = env.get(name)
        return value.strip() if value and value.strip() else None

    def need(name: str, hint: str) -> str:
        value = get(name)
        if value is None:
            raise SettingsError(f"{name} is not set ({hint})")
        return value

    def number(name: str, default: Any, kind: Callable[[str], Any], low: float, high: float) -> Any:
        raw = get(name)
        if raw is None:
            return default
        try:
            value = kind(raw)
        except ValueError:
            raise SettingsError(f"{name}={raw!r} is not a valid {kind.__name__}") from None
        if not low <= value <= high:
            raise SettingsError(f"{name}={raw!r} must be between {low:g} and {high:g}")
        return value

    bot_token = need("SLACK_BOT_TOKEN", "the bot token, xoxb-..., from your Slack app's OAuth page")
    if not bot_token.startswith("xoxb-"):
        raise SettingsError("SLACK_BOT_TOKEN must be a bot token starting with xoxb-")
    app_token = get("SLACK_APP_TOKEN")
    if app_token is not None and not app_token.startswith("xapp-"):
        raise SettingsError("SLACK_APP_TOKEN must be an app-level token starting with xapp- (it turns on Socket Mode)")
    signing_secret = get("SLACK_SIGNING_SECRET")
    if signing_secret is None and app_token is None:
        raise SettingsError("SLACK_SIGNING_SECRET is not set (Basic Information > App Credentials in your Slack app)")

    api_url = get("SLACK_API_URL") or DEFAULT_SLACK_API_URL
    if not api_url.startswith(("http://", "https://")):
        raise SettingsError(f"SLACK_API_URL={api_url!r} must be an http(s) URL")
    if not api_url.endswith("/"):
        api_url += "/"

    database_url = get("DATABASE_URL") or f"sqlite:///{DEFAULT_DATABASE_PATH}"
    try:
        async_url(database_url)
    except BadDatabaseURL as exc:
        raise SettingsError(str(exc)) from None

    tokens = tuple(t.strip() for t in (get("SIGNOFF_API_TOKENS") or "").split(",") if t.strip())
    if any(len(t) < 8 for t in tokens):
        raise SettingsError("SIGNOFF_API_TOKENS: every token must be at least 8 characters")

    policy = get("SIGNOFF_POLICY")
    if policy is not None and not Path(policy).is_file():
        raise SettingsError(f"SIGNOFF_POLICY={policy!r}: no such file")

    anthropic_base = get("ANTHROPIC_BASE_URL")
    if anthropic_base is not None and not anthropic_base.startswith(("http://", "https://")):
        raise SettingsError(f"ANTHROPIC_BASE_URL={anthropic_base!r} must be an http(s) URL")

    default_channel = get("SIGNOFF_DEFAULT_CHANNEL")
    if default_channel is not None and not default_channel[:1] in ("C", "G", "D"):
        raise SettingsError(f"SIGNOFF_DEFAULT_CHANNEL={default_channel!r} must be a channel id (C..., G...)")

    http_timeout = number("SIGNOFF_HTTP_TIMEOUT_SECONDS", 10.0, float, 0.1, 120)
    lease = number("SIGNOFF_OUTBOX_LEASE_SECONDS", 60.0, float, 0.5, 3600)
    if lease <= http_timeout:
        # A lease shorter than one Slack call would let a second process start the same delivery.
        raise SettingsError(
            f"SIGNOFF_OUTBOX_LEASE_SECONDS={lease:g} must be longer than SIGNOFF_HTTP_TIMEOUT_SECONDS={http_timeout:g}"
        )

    level = (get("SIGNOFF_LOG_LEVEL") or "INFO").upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise SettingsError(f"SIGNOFF_LOG_LEVEL={level!r} must be DEBUG, INFO, WARNING or ERROR")

    return Settings(
        slack_bot_token=bot_token,
        slack_signing_secret=signing_secret,
        slack_app_token=app_token,
        slack_api_url=api_url,
        database_url=database_url,
        port=number("PORT", 3000, int, 0, 65535),
        host=get("SIGNOFF_HOST") or "0.0.0.0",
        api_tokens=tokens,
        webhook_secret=get("SIGNOFF_WEBHOOK_SECRET"),
        policy_path=policy,
        anthropic_api_key=get("ANTHROPIC_API_KEY"),
        anthropic_base_url=anthropic_base,
        anthropic_model=get("SIGNOFF_MODEL") or "claude-sonnet-4-5",
        default_channel=default_channel,
        public_url=get("SIGNOFF_PUBLIC_URL"),
        outbox_sweep_seconds=number("SIGNOFF_OUTBOX_SWEEP_SECONDS", 5.0, float, 0.05, 3600),
        outbox_lease_seconds=lease,
        http_timeout_seconds=http_timeout,
        webhook_max_attempts=number("SIGNOFF_WEBHOOK_MAX_ATTEMPTS", 8, int, 1, 50),
        log_level=level,
        extra={k: v for k, v in env.items() if k.startswith("SIGNOFF_")},
    )
