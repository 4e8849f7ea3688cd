"""A tier's `note: true` (docs/ai-notes.md): policy alone asks for the AI note, and only where it asks."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.domain.model import Risk
from bot.domain.policy import Call, evaluate
from bot.policy.file import PolicyError, parse_policy

import pytest

NOW = datetime(2026, 12, 6, tzinfo=UTC)


def test_the_tier_asks_for_the_note_and_only_when_it_asks() -> None:
    policy = parse_policy("tiers:\n  high: {note: true}\nrules:\n  - {name: crit, tool: drop_db, tier: critical}\n")
    asked = evaluate(policy, Call("send_email", {}), None, NOW)
    assert asked.note is True
    assert evaluate(policy, Call("drop_db", {}), None, NOW).note is False
    assert evaluate(parse_policy("tiers:\n  high: {note: true}\n"), Call("t", {}, risk=Risk.LOW), None, NOW).note \
        is False  # allowed: no card, no note


def test_note_must_be_a_boolean() -> None:
    with pytest.raises(PolicyError, match="note"):
        parse_policy("tiers:\n  high: {note: sometimes}\n")
