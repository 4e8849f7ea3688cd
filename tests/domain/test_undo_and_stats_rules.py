"""The undo window's and the statistics' pure rules: policy's `undo:`, the digest's week, percentiles,
the digest settings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.model import Risk
from bot.domain.policy import Call, evaluate
from bot.domain.stats import percentile, short, week_start
from bot.policy.file import PolicyError, parse_policy
from bot.process.settings import Settings, SettingsError

BASE = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}


def test_undo_is_a_short_duration_and_the_longer_window_holds_when_the_agent_raises_the_tier() -> None:
    policy = parse_policy("tiers:\n  high: {undo: 2m}\n  critical: {undo: 30s}\n")
    now = datetime(2030, 1, 7, tzinfo=UTC)
    assert evaluate(policy, Call("send_email", {}), None, now).undo == timedelta(minutes=2)
    raised = evaluate(policy, Call("send_email", {}, asked_risk=Risk.CRITICAL), None, now)
    assert raised.tier is Risk.CRITICAL and raised.undo == timedelta(minutes=2)  # never shorter than policy's own
    assert evaluate(parse_policy("rules: []\n"), Call("send_email", {}), None, now).undo is None
    for bad, why in (("11m", "maximum of 10m"), ("0s", "zero"), ("soon", "not a duration")):
        with pytest.raises(PolicyError) as error:
            parse_policy(f"tiers:\n  high: {{undo: {bad}}}\n", "p.yaml")
        assert "tiers.high.undo" in str(error.value) and why in str(error.value), str(error.value)


def test_the_digest_week_starts_at_its_weekday_and_hour_in_utc() -> None:
    monday_9 = datetime(2030, 1, 7, 9, tzinfo=UTC)
    assert week_start(monday_9) == monday_9
    assert week_start(monday_9 - timedelta(seconds=1)) == monday_9 - timedelta(days=7)
    assert week_start(datetime(2030, 1, 13, 23, tzinfo=UTC)) == monday_9
    assert week_start(datetime(2030, 1, 11, 18, tzinfo=UTC), weekday=4, hour=17) == datetime(2030, 1, 11, 17, tzinfo=UTC)


def test_percentiles_are_nearest_rank_and_durations_read_short() -> None:
    values = [timedelta(seconds=s) for s in (600, 120, 300)]
    assert percentile(values, 50) == timedelta(seconds=300) and percentile(values, 90) == timedelta(seconds=600)
    assert percentile([], 50) is None
    assert [short(timedelta(seconds=s)) for s in (42, 300, 4800, 7200, 200000)] == [
        "42 s", "5 min", "1 h 20 min", "2 h", "2 d 7 h"]


def test_digest_settings_are_checked_at_start() -> None:
    settings = Settings.from_env({**BASE, "SIGNOFF_DIGEST_CHANNELS": "C1, all", "SIGNOFF_DIGEST_AT": "fri 17:00"},
                                 dotenv=None)
    assert settings.digest_channels == ("C1", "all") and settings.digest_at == (4, 17)
    for name, value in (("SIGNOFF_DIGEST_CHANNELS", "#general"), ("SIGNOFF_DIGEST_AT", "monday 9am")):
        with pytest.raises(SettingsError) as error:
            Settings.from_env({**BASE, name: value}, dotenv=None)
        assert name in str(error.value)
