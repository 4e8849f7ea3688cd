"""How one setting's text becomes its value: durations, networks, people, choices, the weekly digest's
schedule, and the groups of settings the timers and the agent runner read. Each error is a
`SettingsError` whose message is one line naming the variable (bot/process/settings.py reads them)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from bot.domain.durations import DurationError, parse_duration
from bot.domain.values import APPROVER_ID, CHANNEL_ID

_SLACK_PERSON = APPROVER_ID  # the shape of an approver: a Slack user id or user group
_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
HOST_OR_NET = re.compile(r"^(\*\.)?[A-Za-z0-9.:\-\[\]]+(/\d{1,3})?$")


class SettingsError(Exception):
    """A setting is missing or malformed; the message is one line naming it."""


def network(entry: str) -> Any:
    try:
        return ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return None


def digest_channels(raw: str | None) -> tuple[str, ...]:
    """SIGNOFF_DIGEST_CHANNELS: channel ids (C..., G...), comma-separated, or `all`."""
    channels = tuple(c.strip() for c in (raw or "").split(",") if c.strip())
    for channel in channels:
        if channel != "all" and not CHANNEL_ID.match(channel):
            raise SettingsError(f"SIGNOFF_DIGEST_CHANNELS: {channel!r} is not a channel id (C0123ABCD) or 'all'")
    return channels


def digest_at(raw: str | None) -> tuple[int, int]:
    """SIGNOFF_DIGEST_AT: `mon 09:00` (a weekday and a whole hour, UTC); default Monday 09:00."""
    if not raw or not raw.strip():
        return (0, 9)
    found = re.fullmatch(r"\s*([A-Za-z]{3})[a-z]*\s+(\d{1,2}):00\s*", raw)
    if not found or found.group(1).lower() not in _WEEKDAYS or int(found.group(2)) > 23:
        raise SettingsError(f"SIGNOFF_DIGEST_AT={raw!r} must be a weekday and a whole hour in UTC, e.g. 'mon 09:00'")
    return (_WEEKDAYS.index(found.group(1).lower()), int(found.group(2)))


def timers(get: Callable[[str], str | None], number: Callable[..., Any]) -> dict[str, Any]:
    """SIGNOFF_REMIND_EVERY / _REMIND_MAX, SIGNOFF_ESCALATE_AFTER / _TO / _ADD_AS_APPROVERS,
    SIGNOFF_TIMEOUT / _TIMEOUT_OUTCOME, SIGNOFF_SWEEP_SECONDS, and the test-only SIGNOFF_CLOCK_FILE."""

    def duration(name: str, default: timedelta | None) -> timedelta | None:
        raw = get(name)
        if raw is None:
            return default
        if raw.lower() in ("off", "none", "never"):
            return None
        try:
            return parse_duration(raw)
        except DurationError as exc:
            raise SettingsError(f"{name}: {exc}") from None

    remind_every = duration("SIGNOFF_REMIND_EVERY", timedelta(hours=1))
    escalate_after = duration("SIGNOFF_ESCALATE_AFTER", None)
    escalate_to = tuple(t.strip() for t in (get("SIGNOFF_ESCALATE_TO") or "").split(",") if t.strip())
    for target in escalate_to:
        if not _SLACK_PERSON.match(target):
            raise SettingsError(
                f"SIGNOFF_ESCALATE_TO: {target!r} is not a Slack user id (U..., W...) or user group (S...)"
            )
    if (escalate_after is None) != (not escalate_to):
        raise SettingsError("SIGNOFF_ESCALATE_AFTER and SIGNOFF_ESCALATE_TO must be set together (or neither)")
    add = (get("SIGNOFF_ESCALATE_ADD_AS_APPROVERS") or "true").lower()
    if add not in ("true", "false", "1", "0", "yes", "no"):
        raise SettingsError(f"SIGNOFF_ESCALATE_ADD_AS_APPROVERS={add!r} must be true or false")
    timeout = duration("SIGNOFF_TIMEOUT", timedelta(hours=24))
    outcome = (get("SIGNOFF_TIMEOUT_OUTCOME") or "expire").lower()
    if outcome not in ("expire", "reject"):
        # approve-on-timeout is only for low-risk requests, so only a request may ask for it.
        raise SettingsError(f"SIGNOFF_TIMEOUT_OUTCOME={outcome!r} must be expire or reject")
    if timeout is not None and remind_every is not None and timeout <= remind_every:
        raise SettingsError("SIGNOFF_TIMEOUT must be longer than SIGNOFF_REMIND_EVERY (or turn reminders off)")
    clock_file = get("SIGNOFF_CLOCK_FILE")
    if clock_file is not None and not Path(clock_file).is_file():
        raise SettingsError(f"SIGNOFF_CLOCK_FILE={clock_file!r}: no such file (a test-only setting)")
    return {
        "remind_every": remind_every,
        "remind_max": number("SIGNOFF_REMIND_MAX", 3, int, 0, 100),
        "escalate_after": escalate_after,
        "escalate_to": escalate_to,
        "escalate_add_as_approvers": add in ("true", "1", "yes"),
        "timeout": timeout,
        "timeout_outcome": outcome,
        "sweep_seconds": number("SIGNOFF_SWEEP_SECONDS", 15.0, float, 0.01, 3600),
        "clock_file": clock_file,
    }


def agent(get: Callable[[str], str | None], number: Callable[..., Any]) -> dict[str, Any]:
    """SIGNOFF_MAX_TOKENS, SIGNOFF_MODEL_MAX_RETRIES, SIGNOFF_WORKSPACE, SIGNOFF_EMAIL_OUTBOX,
    SIGNOFF_RUN_LEASE_SECONDS, SIGNOFF_RUN_SWEEP_SECONDS, SIGNOFF_RUN_MAX_STEPS, SIGNOFF_NOTE_MODEL,
    SIGNOFF_NOTE_TIMEOUT_SECONDS."""
    return {
        "anthropic_max_tokens": number("SIGNOFF_MAX_TOKENS", 4096, int, 1, 128_000),
        "anthropic_max_retries": number("SIGNOFF_MODEL_MAX_RETRIES", 2, int, 0, 10),
        "agent_workspace": get("SIGNOFF_WORKSPACE") or "workspace",
        "email_outbox": get("SIGNOFF_EMAIL_OUTBOX") or "outbox",
        "run_lease_seconds": number("SIGNOFF_RUN_LEASE_SECONDS", 30.0, float, 0.5, 3600),
        "run_sweep_seconds": number("SIGNOFF_RUN_SWEEP_SECONDS", 5.0, float, 0.05, 3600),
        "run_max_steps": number("SIGNOFF_RUN_MAX_STEPS", 50, int, 1, 10_000),
        "note_model": get("SIGNOFF_NOTE_MODEL") or None,
        "note_timeout_seconds": number("SIGNOFF_NOTE_TIMEOUT_SECONDS", 20.0, float, 0.05, 300),
        "run_starters": people(get, "SIGNOFF_RUN_STARTERS"),
        "run_approvers": people(get, "SIGNOFF_RUN_APPROVERS"),
        "run_writers": people(get, "SIGNOFF_RUN_WRITERS"),
        "run_self_approval": choice(get, "SIGNOFF_RUN_SELF_APPROVAL", "false", ("true", "false")) == "true",
        "fetch_url_risk": choice(get, "SIGNOFF_FETCH_URL_RISK", "high", ("low", "medium", "high", "critical")),
    }


def duration_setting(get: Callable[[str], str | None], name: str, default: timedelta) -> timedelta:
    raw = get(name)
    if raw is None:
        return default
    try:
        return parse_duration(raw)
    except DurationError as exc:
        raise SettingsError(f"{name}: {exc}") from None


def networks(get: Callable[[str], str | None], name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    raw = get(name)
    if raw is None:
        return default
    entries = tuple(e.strip() for e in raw.split(",") if e.strip())
    for entry in entries:
        if network(entry) is None:
            raise SettingsError(f"{name}: {entry!r} is not an IP address or CIDR")
    return entries


def people(get: Callable[[str], str | None], name: str) -> tuple[str, ...]:
    entries = tuple(t.strip() for t in (get(name) or "").split(",") if t.strip())
    for entry in entries:
        if not _SLACK_PERSON.match(entry):
            raise SettingsError(f"{name}: {entry!r} is not a Slack user id (U..., W...) or user group (S...)")
    return entries


def choice(get: Callable[[str], str | None], name: str, default: str, choices: tuple[str, ...]) -> str:
    value = (get(name) or default).lower()
    if value not in choices:
        raise SettingsError(f"{name}={value!r} must be one of: {', '.join(choices)}")
    return value


MAX_RETENTION_DAYS = 36500


def retention_days(raw: str | None) -> int | None:
    """SIGNOFF_RETENTION_DAYS: a whole number of days (1 to 100 years), or unset / `off`: keep everything."""
    if raw is None or raw.strip().lower() == "off":
        return None
    text = raw.strip()
    if not text.isdigit() or not 1 <= int(text) <= MAX_RETENTION_DAYS:
        raise SettingsError(f"SIGNOFF_RETENTION_DAYS={raw!r} must be a whole number of days from 1 to "
                            f"{MAX_RETENTION_DAYS} (or off: keep every request)")
    return int(text)
