"""Which Slack errors no retry gets past, and the fix each one's line names."""

from __future__ import annotations

import pytest

from bot.slack.failures import TRANSIENT_ERRORS, permanent_failure


@pytest.mark.parametrize(("error", "says"), [
    ("invalid_auth", "set SLACK_BOT_TOKEN and restart"),
    ("not_authed", "set SLACK_BOT_TOKEN"),
    ("token_revoked", "reinstall the app"),
    ("token_expired", "turn rotation off"),
    ("account_inactive", "deactivated bot or workspace"),
])
def test_token_errors_are_permanent_for_every_call(error: str, says: str) -> None:
    failure = permanent_failure("chat.update", error, {"ok": False, "error": error})
    assert failure is not None and failure.token_wide and says in failure.fix
    assert failure.line.startswith(f"Slack refused chat.update: {error}; ")


def test_missing_scope_names_the_scope_or_says_it_could_not() -> None:
    named = permanent_failure("views.publish", "missing_scope", {"needed": "users:read", "provided": "chat:write"})
    assert named is not None and named.needed == "users:read" and "lacks the scope users:read" in named.fix
    unnamed = permanent_failure("views.publish", "missing_scope", {})
    assert unnamed is not None and "lacks a scope views.publish needs" in unnamed.fix


@pytest.mark.parametrize("error", ["channel_not_found", "not_in_channel", "is_archived"])
def test_channel_errors_concern_that_channel_only(error: str) -> None:
    failure = permanent_failure("chat.postMessage", error, {}, channel="C9")
    assert failure is not None and not failure.token_wide and "channel C9" in failure.fix
    assert failure.to_json()["channel"] == "C9"


@pytest.mark.parametrize("error", sorted(TRANSIENT_ERRORS | {"invalid_blocks", "msg_too_long"}))
def test_other_errors_are_not_classified_permanent_here(error: str) -> None:
    assert permanent_failure("chat.postMessage", error, {}) is None
