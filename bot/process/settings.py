"""The one place that reads the environment (and `.env`).

`Settings.from_env()` takes an injectable mapping; a missing or malformed value
raises `SettingsError` whose message is one line naming the variable (the parsers of one setting's
text are bot/process/setting_parsers.py's).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from dotenv import dotenv_values

from bot.api.tokens import ApiToken, parse_tokens
from bot.approvals.keys import private_from_seed
from bot.domain.history import Thresholds
from bot.domain.timing import TIMEOUT_OUTCOMES, Level, Timing
from bot.domain.values import CHANNEL_ID
from bot.process import setting_parsers as parsers
from bot.process.setting_parsers import SettingsError as SettingsError
from storage.urls import BadDatabaseURL, async_url

DEFAULT_SLACK_API_URL = "https://slack.com/api/"
DEFAULT_DATABASE_PATH = "signoff.db"
# The shape the agent API accepts for `channel`.
_CHANNEL_ID = CHANNEL_ID


# Every SIGNOFF_* variable Signoff reads (tests/process/test_settings_hygiene.py keeps this complete), plus
# the agent side's (signoff/ reads SIGNOFF_URL and SIGNOFF_TOKEN; agents and servers may share a .env)
# and the test and bench suites'. Anything else starting with SIGNOFF_ is most likely a typo.
KNOWN_SETTINGS = frozenset({
    "SIGNOFF_SIGNING_KEY", "SIGNOFF_PUBLIC_KEY",  # the server's signing key; the agent side's pinned public half
    "SIGNOFF_API_TOKENS", "SIGNOFF_HOST", "SIGNOFF_WEBHOOK_SECRET", "SIGNOFF_WEBHOOK_MAX_ATTEMPTS",
    "SIGNOFF_DEFAULT_CHANNEL", "SIGNOFF_HTTP_TIMEOUT_SECONDS", "SIGNOFF_OUTBOX_LEASE_SECONDS",
    "SIGNOFF_OUTBOX_SWEEP_SECONDS", "SIGNOFF_POLICY", "SIGNOFF_LOG_LEVEL", "SIGNOFF_REMIND_EVERY",
    "SIGNOFF_REMIND_MAX", "SIGNOFF_ESCALATE_AFTER", "SIGNOFF_ESCALATE_TO", "SIGNOFF_ESCALATE_ADD_AS_APPROVERS",
    "SIGNOFF_TIMEOUT", "SIGNOFF_TIMEOUT_OUTCOME", "SIGNOFF_SWEEP_SECONDS", "SIGNOFF_CLOCK_FILE", "SIGNOFF_MODEL",
    "SIGNOFF_MAX_TOKENS", "SIGNOFF_MODEL_MAX_RETRIES", "SIGNOFF_WORKSPACE", "SIGNOFF_EMAIL_OUTBOX",
    "SIGNOFF_RUN_LEASE_SECONDS", "SIGNOFF_RUN_SWEEP_SECONDS", "SIGNOFF_RUN_MAX_STEPS",
    "SIGNOFF_ALLOW_EPHEMERAL_SQLITE",
    "SIGNOFF_URL", "SIGNOFF_TOKEN", "SIGNOFF_CHANNEL", "SIGNOFF_APPROVERS", "SIGNOFF_TEST_DATABASE_URL",
    "SIGNOFF_BENCH_PG_URL",
    "SIGNOFF_EGRESS_ALLOW", "SIGNOFF_FETCH_URL_RISK", "SIGNOFF_LONGPOLL_MAX", "SIGNOFF_LONGPOLL_PER_TOKEN",
    "SIGNOFF_METRICS_ALLOW", "SIGNOFF_METRICS_TOKEN", "SIGNOFF_RUN_APPROVERS", "SIGNOFF_RUN_SELF_APPROVAL",
    "SIGNOFF_RUN_STARTERS", "SIGNOFF_RUN_WRITERS", "SIGNOFF_SLACK_CHANNEL_PACE_SECONDS",
    "SIGNOFF_WEBHOOK_BACKOFF_CAP_SECONDS", "SIGNOFF_WEBHOOK_MAX_AGE",
    "SIGNOFF_HEADER_TIMEOUT_SECONDS", "SIGNOFF_VALIDATION_BUDGET_MS", "SIGNOFF_SUBMIT_RATE_PER_TOKEN",
    "SIGNOFF_SUBMIT_BURST_PER_TOKEN", "SIGNOFF_MAX_PENDING_PER_TOKEN", "SIGNOFF_BODY_TIMEOUT_SECONDS",
    "SIGNOFF_CLAUDE_TRANSCRIPTS",
    "SIGNOFF_METRICS_MAX_CHANNELS", "SIGNOFF_METRICS_MAX_TOOLS", "SIGNOFF_DIGEST_CHANNELS", "SIGNOFF_DIGEST_AT",
    "SIGNOFF_AUDIT_ANCHOR_SECONDS",
    "SIGNOFF_SLACK_INBOX_LEASE_SECONDS", "SIGNOFF_NOTE_MODEL", "SIGNOFF_NOTE_TIMEOUT_SECONDS",
    "SIGNOFF_SUGGEST_DAYS", "SIGNOFF_SUGGEST_MIN_APPROVALS", "SIGNOFF_SUGGEST_MIN_PEOPLE", "SIGNOFF_SUGGEST_MAX_EDITS",
    "SIGNOFF_SUGGEST_MIN_REJECTIONS", "SIGNOFF_SUGGEST_MIN_REJECT_SHARE", "SIGNOFF_SUGGEST_GRANT_DAYS",
    "SIGNOFF_SIMILAR_MIN", "SIGNOFF_RETENTION_DAYS",
})


def unknown_settings(env: Mapping[str, str], known: frozenset[str] = KNOWN_SETTINGS) -> list[str]:
    """One warning line per SIGNOFF_* name Signoff does not read, with the closest known name."""
    lines = []
    for name in sorted(k for k in env if k.startswith("SIGNOFF_") and k not in known):
        # Compared without the shared prefix, which would make every pair look alike.
        close = difflib.get_close_matches(name[8:], sorted(k[8:] for k in known), n=1, cutoff=0.7)
        hint = f"did you mean SIGNOFF_{close[0]}?" if close else "Signoff does not read it (see the README's settings)"
        lines.append(f"{name} is not a Signoff setting: {hint}")
    return lines


@dataclass(frozen=True)
class Settings:
    # Secrets are left out of repr (a logged or printed Settings must not leak them).
    slack_bot_token: str = field(repr=False)
    slack_signing_secret: str | None = field(repr=False)
    slack_app_token: str | None = field(default=None, repr=False)
    slack_api_url: str = DEFAULT_SLACK_API_URL
    database_url: str = field(default=f"sqlite:///{DEFAULT_DATABASE_PATH}", repr=False)  # may hold a password
    port: int = 3000
    host: str = "0.0.0.0"
    api_tokens: tuple[str, ...] = field(default=(), repr=False)
    api_token_specs: tuple[ApiToken, ...] = field(default=(), repr=False)  # names and scopes (bot/api/tokens.py)
    webhook_secret: str | None = field(default=None, repr=False)
    signing_key: str | None = field(default=None, repr=False)  # SIGNOFF_SIGNING_KEY (bot/approvals/keys.py)
    policy_path: str | None = None
    anthropic_api_key: str | None = field(default=None, repr=False)
    anthropic_base_url: str | None = None
    anthropic_model: str = "claude-sonnet-4-5"
    default_channel: str | None = None
    outbox_sweep_seconds: float = 5.0
    outbox_lease_seconds: float = 60.0
    http_timeout_seconds: float = 10.0
    webhook_max_attempts: int = 200
    webhook_max_age: timedelta = timedelta(hours=24)
    webhook_backoff_cap_seconds: float = 1800.0
    log_level: str = "INFO"
    # Issue 9: hosts and CIDRs an agent- or API-supplied URL may reach although not public (bot/outbox/egress.py).
    egress_allow: tuple[str, ...] = ()
    metrics_token: str | None = field(default=None, repr=False)  # SIGNOFF_METRICS_TOKEN
    metrics_allow: tuple[str, ...] = ("127.0.0.0/8", "::1/128")  # SIGNOFF_METRICS_ALLOW: CIDRs without a token
    slack_channel_pace_seconds: float = 1.0  # SIGNOFF_SLACK_CHANNEL_PACE_SECONDS (bot/slack/pace.py)
    # How long a stored Slack input stays with the process that acked it before another replays it
    slack_inbox_lease_seconds: float = 30.0  # SIGNOFF_SLACK_INBOX_LEASE_SECONDS (bot/slack/received.py)
    longpoll_per_token: int = 100
    # A connection's request headers must arrive within this long (also an idle keep-alive's life).
    header_timeout_seconds: float = 15.0  # SIGNOFF_HEADER_TIMEOUT_SECONDS
    # What checking an action's params against its params_schema may cost (bot/api/validation.py).
    validation_budget_ms: int = 1000  # SIGNOFF_VALIDATION_BUDGET_MS
    submit_rate_per_token: float = 10.0  # SIGNOFF_SUBMIT_RATE_PER_TOKEN: approvals a second (bot/api/rate.py)
    submit_burst_per_token: int = 50  # SIGNOFF_SUBMIT_BURST_PER_TOKEN: taken at once before the rate applies
    max_pending_per_token: int = 1000  # SIGNOFF_MAX_PENDING_PER_TOKEN: a token's requests waiting at once (429 past it)
    # A request's body, once its headers are in, must arrive within this long (a slow body is cut off: 408).
    body_timeout_seconds: float = 30.0  # SIGNOFF_BODY_TIMEOUT_SECONDS
    longpoll_max: int = 2000
    fetch_url_risk: str = "high"  # the demo agent's fetch_url gate (SIGNOFF_FETCH_URL_RISK)
    # Who may start runs, approve their cards, write into / cancel them (bot/agent/access.py).
    run_starters: tuple[str, ...] = ()
    run_approvers: tuple[str, ...] = ()
    run_writers: tuple[str, ...] = ()
    run_self_approval: bool = False
    # Read the Claude Code transcript an HTTP hook names (only where the server runs on the agents' own
    # machine): how many tool calls a turn holds decides whether a call may be deferred.
    claude_transcripts: bool = False  # SIGNOFF_CLAUDE_TRANSCRIPTS=read
    # Timers: the timing of requests that do not give their own, and the sweep's interval.
    remind_every: timedelta | None = timedelta(hours=1)
    remind_max: int = 3
    escalate_after: timedelta | None = None
    escalate_to: tuple[str, ...] = ()
    escalate_add_as_approvers: bool = True
    timeout: timedelta | None = timedelta(hours=24)
    timeout_outcome: str = "expire"
    sweep_seconds: float = 15.0
    clock_file: str | None = None  # TEST ONLY (SIGNOFF_CLOCK_FILE): see bot.process.clock.FileClock
    # Agent runner: model limits, the demo tools' folders, leases and recovery.
    anthropic_max_tokens: int = 4096
    anthropic_max_retries: int = 2
    agent_workspace: str = "workspace"
    email_outbox: str = "outbox"
    run_lease_seconds: float = 30.0
    run_sweep_seconds: float = 5.0
    run_max_steps: int = 50
    # AI notes and thread answers (docs/ai-notes.md): their model (default: SIGNOFF_MODEL) and time limit.
    note_model: str | None = None
    note_timeout_seconds: float = 20.0
    # Time to decide (docs/stats.md): label bounds of the histograms; the weekly digest's channels
    # ("all": every channel that had requests that week; empty: no digest) and its time (weekday, hour UTC).
    metrics_max_channels: int = 50
    metrics_max_tools: int = 50
    digest_channels: tuple[str, ...] = ()
    digest_at: tuple[int, int] = (0, 9)
    audit_anchor_seconds: float = 3600.0  # how often the audit chain's head is signed and kept (docs/audit.md)
    # Suggestions from the decision record (docs/policy.md): when history is enough, and how long the grant
    # accepting one makes lasts (None: until revoked).
    suggest: Thresholds = Thresholds()
    suggest_grant_days: int | None = 30
    # Similar pending requests together (docs/policy.md): from how many one card offers them (0: never).
    similar_min: int = 5
    # Retention (docs/settings.md, bot/approvals/retention.py): decided requests older than this many days
    # are archived out of the hot tables (the audit log is kept whole). None: every request is kept.
    retention_days: int | None = None
    extra: Mapping[str, str] = field(default_factory=dict, repr=False)  # raw SIGNOFF_* values

    def unknown_settings_lines(self) -> list[str]:
        """Warnings for SIGNOFF_* variables (environment or .env) that Signoff does not read."""
        return unknown_settings(self.extra)

    def default_timing(self) -> Timing:
        """The timing a request gets for each part (reminders, escalation, timeout) it does not give."""
        levels: tuple[Level, ...] = ()
        if self.escalate_after is not None and self.escalate_to:
            levels = (Level(self.escalate_after, self.escalate_to, self.escalate_add_as_approvers),)
        return Timing(
            remind_every=self.remind_every,
            remind_max=self.remind_max if self.remind_every is not None else 0,
            levels=levels,
            timeout=self.timeout,
            timeout_outcome=TIMEOUT_OUTCOMES[self.timeout_outcome],
        )

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


@dataclass(frozen=True)
class RunSettings:
    """What `signoff run` needs: the server's database, the default channel, the log level. No Slack."""

    database_url: str
    default_channel: str | None
    log_level: str
    anthropic_api_key: str | None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, dotenv: str | Path | None = ".env") -> RunSettings:
        env = _read(environ, dotenv)
        channel = (env.get("SIGNOFF_DEFAULT_CHANNEL") or "").strip() or None
        if channel is not None and not _CHANNEL_ID.match(channel):
            raise SettingsError(f"SIGNOFF_DEFAULT_CHANNEL={channel!r} must be a channel id (C..., G...)")
        return cls(database_url_from_env(environ, dotenv=dotenv), channel, log_level_from_env(environ, dotenv=dotenv),
                   (env.get("ANTHROPIC_API_KEY") or "").strip() or None)


def log_level_from_env(environ: Mapping[str, str] | None = None, *, dotenv: str | Path | None = ".env") -> str:
    level = (_read(environ, dotenv).get("SIGNOFF_LOG_LEVEL") or "INFO").strip().upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise SettingsError(f"SIGNOFF_LOG_LEVEL={level!r} must be DEBUG, INFO, WARNING or ERROR")
    return level


def database_url_from_env(environ: Mapping[str, str] | None = None, *, dotenv: str | Path | None = ".env") -> str:
    """Just DATABASE_URL (for `signoff db upgrade`, which needs no Slack settings)."""
    url = (_read(environ, dotenv).get("DATABASE_URL") or "").strip() or f"sqlite:///{DEFAULT_DATABASE_PATH}"
    try:
        async_url(url)
    except BadDatabaseURL as exc:
        raise SettingsError(str(exc)) from None
    return url


def _numbers(get: Callable[[str], str | None]) -> Callable[..., Any]:
    """`number(name, default, kind, low, high)`: a setting read as `kind`, within [low, high], or one clear error."""

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

    return number


def suggest_from_env(environ: Mapping[str, str] | None = None, *, dotenv: str | Path | None = ".env") -> Thresholds:
    """Just SIGNOFF_SUGGEST_* (for `signoff policy suggest`, which needs no Slack settings)."""
    env = _read(environ, dotenv)
    return _suggest(_numbers(lambda name: (env.get(name) or "").strip() or None))


def _parse(env: Mapping[str, str]) -> Settings:
    def get(name: str) -> str | None:
        value = env.get(name)
        return value.strip() if value and value.strip() else None

    def need(name: str, hint: str) -> str:
        value = get(name)
        if value is None:
            raise SettingsError(f"{name} is not set ({hint})")
        return value

    number = _numbers(get)

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

    try:
        token_specs = parse_tokens(get("SIGNOFF_API_TOKENS") or "")
    except ValueError as exc:
        raise SettingsError(f"SIGNOFF_API_TOKENS: {exc}") from None
    tokens = tuple(t.secret for t in token_specs)

    policy = get("SIGNOFF_POLICY")
    if policy is not None and not Path(policy).is_file():
        raise SettingsError(f"SIGNOFF_POLICY={policy!r}: no such file")

    anthropic_base = get("ANTHROPIC_BASE_URL")
    if anthropic_base is not None and not anthropic_base.startswith(("http://", "https://")):
        raise SettingsError(f"ANTHROPIC_BASE_URL={anthropic_base!r} must be an http(s) URL")

    default_channel = get("SIGNOFF_DEFAULT_CHANNEL")
    if default_channel is not None and not _CHANNEL_ID.match(default_channel):
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

    egress_allow = tuple(e.strip() for e in (get("SIGNOFF_EGRESS_ALLOW") or "").split(",") if e.strip())
    for entry in egress_allow:
        if ("/" in entry and parsers.network(entry) is None) or not parsers.HOST_OR_NET.match(entry):
            raise SettingsError(f"SIGNOFF_EGRESS_ALLOW: {entry!r} is not a host name, an IP address or a CIDR")

    signing_key = get("SIGNOFF_SIGNING_KEY")
    if signing_key is not None:
        try:
            private_from_seed(signing_key)
        except ValueError as exc:
            raise SettingsError(f"SIGNOFF_SIGNING_KEY is not an Ed25519 key's 32-byte seed in base64url ({exc}); "
                                "`signoff keys --new` prints one") from None

    return Settings(
        signing_key=signing_key,
        egress_allow=egress_allow,
        slack_bot_token=bot_token,
        slack_signing_secret=signing_secret,
        slack_app_token=app_token,
        slack_api_url=api_url,
        database_url=database_url,
        port=number("PORT", 3000, int, 0, 65535),
        host=get("SIGNOFF_HOST") or "0.0.0.0",
        api_tokens=tokens,
        api_token_specs=token_specs,
        webhook_secret=get("SIGNOFF_WEBHOOK_SECRET"),
        policy_path=policy,
        anthropic_api_key=get("ANTHROPIC_API_KEY"),
        anthropic_base_url=anthropic_base,
        anthropic_model=get("SIGNOFF_MODEL") or "claude-sonnet-4-5",
        default_channel=default_channel,
        outbox_sweep_seconds=number("SIGNOFF_OUTBOX_SWEEP_SECONDS", 5.0, float, 0.05, 3600),
        outbox_lease_seconds=lease,
        http_timeout_seconds=http_timeout,
        webhook_max_attempts=number("SIGNOFF_WEBHOOK_MAX_ATTEMPTS", 200, int, 1, 10_000),
        webhook_max_age=parsers.duration_setting(get, "SIGNOFF_WEBHOOK_MAX_AGE", timedelta(hours=24)),
        webhook_backoff_cap_seconds=number("SIGNOFF_WEBHOOK_BACKOFF_CAP_SECONDS", 1800.0, float, 1, 86_400),
        metrics_token=get("SIGNOFF_METRICS_TOKEN"),
        metrics_allow=parsers.networks(get, "SIGNOFF_METRICS_ALLOW", ("127.0.0.0/8", "::1/128")),
        slack_channel_pace_seconds=number("SIGNOFF_SLACK_CHANNEL_PACE_SECONDS", 1.0, float, 0, 60),
        slack_inbox_lease_seconds=number("SIGNOFF_SLACK_INBOX_LEASE_SECONDS", 30.0, float, 0.5, 3600),
        longpoll_per_token=number("SIGNOFF_LONGPOLL_PER_TOKEN", 100, int, 1, 100_000),
        longpoll_max=number("SIGNOFF_LONGPOLL_MAX", 2000, int, 1, 1_000_000),
        header_timeout_seconds=number("SIGNOFF_HEADER_TIMEOUT_SECONDS", 15.0, float, 0.1, 3600),
        validation_budget_ms=number("SIGNOFF_VALIDATION_BUDGET_MS", 1000, int, 10, 60_000),
        submit_rate_per_token=number("SIGNOFF_SUBMIT_RATE_PER_TOKEN", 10.0, float, 0.01, 100_000),
        submit_burst_per_token=number("SIGNOFF_SUBMIT_BURST_PER_TOKEN", 50, int, 1, 1_000_000),
        max_pending_per_token=number("SIGNOFF_MAX_PENDING_PER_TOKEN", 1000, int, 1, 100_000_000),
        body_timeout_seconds=number("SIGNOFF_BODY_TIMEOUT_SECONDS", 30.0, float, 0.1, 3600),
        claude_transcripts=parsers.choice(get, "SIGNOFF_CLAUDE_TRANSCRIPTS", "off", ("off", "read")) == "read",
        log_level=level,
        metrics_max_channels=number("SIGNOFF_METRICS_MAX_CHANNELS", 50, int, 1, 10_000),
        metrics_max_tools=number("SIGNOFF_METRICS_MAX_TOOLS", 50, int, 1, 10_000),
        digest_channels=parsers.digest_channels(get("SIGNOFF_DIGEST_CHANNELS")),
        digest_at=parsers.digest_at(get("SIGNOFF_DIGEST_AT")),
        audit_anchor_seconds=number("SIGNOFF_AUDIT_ANCHOR_SECONDS", 3600.0, float, 0.01, 7 * 86400),
        suggest=_suggest(number),
        suggest_grant_days=number("SIGNOFF_SUGGEST_GRANT_DAYS", 30, int, 0, 3650) or None,
        similar_min=_similar_min(number("SIGNOFF_SIMILAR_MIN", 5, int, 0, 50)),
        retention_days=parsers.retention_days(get("SIGNOFF_RETENTION_DAYS")),
        **parsers.timers(get, number),
        **parsers.agent(get, number),
        extra={k: v for k, v in env.items() if k.startswith("SIGNOFF_")},
    )


def _similar_min(value: int) -> int:
    if value == 1:
        raise SettingsError("SIGNOFF_SIMILAR_MIN=1: a group needs at least 2 requests (0 turns the cards off)")
    return value


def _suggest(number: Callable[..., Any]) -> Thresholds:
    """SIGNOFF_SUGGEST_*: the thresholds of suggestions from the decision record (bot.domain.history)."""
    d = Thresholds()
    return Thresholds(days=number("SIGNOFF_SUGGEST_DAYS", d.days, int, 1, 365),
                      min_approvals=number("SIGNOFF_SUGGEST_MIN_APPROVALS", d.min_approvals, int, 1, 1_000_000),
                      min_people=number("SIGNOFF_SUGGEST_MIN_PEOPLE", d.min_people, int, 1, 10_000),
                      max_edits=number("SIGNOFF_SUGGEST_MAX_EDITS", d.max_edits, int, 0, 1_000_000),
                      min_rejections=number("SIGNOFF_SUGGEST_MIN_REJECTIONS", d.min_rejections, int, 1, 1_000_000),
                      min_reject_share=number("SIGNOFF_SUGGEST_MIN_REJECT_SHARE", d.min_reject_share, float, 0.5, 1))
