"""Suggestions from the decision record (bot.domain.history), table-driven over generated histories."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.grants import Scope
from bot.domain.history import Decided, Thresholds, grant_prefix, suggest, suggested_grant
from bot.domain.model import Outcome, Via
from bot.domain.values import Risk
from bot.process.settings import Settings, SettingsError

NOW = datetime(2026, 12, 6, 12, tzinfo=UTC)


def history(approved: int, rejected: int = 0, *, people: int = 4, edited: int = 0, tool: str = "send_email",
            to: str = "c{n}@example.com", via: Via = Via.BUTTON, risk: Risk = Risk.HIGH,
            age_days: float = 1, channels: tuple[str, ...] = ("C1",)) -> list[Decided]:
    rows = []
    for n in range(approved + rejected):
        rows.append(Decided(tool, {"to": to.format(n=n), "subject": f"s{n}"},
                            Outcome.APPROVED if n < approved else Outcome.REJECTED, via, f"U{n % people}",
                            NOW - timedelta(days=age_days, minutes=n), risk, edited=n < edited,
                            channel=channels[n % len(channels)]))
    return rows


CASES = [
    # (name, history, expected [(effect, scope)])
    ("enough approvals by enough people", history(23, edited=1), [("allow", "send_email to *@example.com")]),
    ("one approval short", history(19), []),
    ("too few people", history(30, people=2), []),
    ("one rejection spoils an allow", history(25, 1), []),
    ("too many edits", history(25, edited=2), []),
    ("policy's and grants' decisions do not count", history(30, via=Via.POLICY) + history(30, via=Via.GRANT), []),
    ("timeouts do not count", history(30, via=Via.TIMEOUT), []),
    ("older than the window", history(30, age_days=15), []),
    ("critical is never suggested to allow", history(40, risk=Risk.CRITICAL), []),
    ("a critical request in the group stops an allow", history(30) + history(1, risk=Risk.CRITICAL), []),
    ("a deny is suggested at critical too (only stricter)", history(1, 6, tool="db_exec", to="prod-{n}",
                                                                    risk=Risk.CRITICAL), [("deny", "db_exec")]),
    ("mostly rejected: deny", history(1, 6, tool="db_exec", to="prod-{n}"), [("deny", "db_exec")]),
    ("rejected but not mostly", history(3, 5, tool="db_exec", to="prod-{n}"), []),
    ("too few rejections", history(0, 4, tool="db_exec", to="prod-{n}"), []),
]


@pytest.mark.parametrize(("name", "rows", "expected"), CASES, ids=[c[0] for c in CASES])
def test_thresholds(name: str, rows: list[Decided], expected: list[tuple[str, str]]) -> None:
    assert [(s.effect, s.scope) for s in suggest(rows, NOW)] == expected


def test_domains_are_suggested_apart_and_the_text_and_rule_say_exactly_what() -> None:
    rows = history(23, edited=1) + history(25, to="x{n}@other.org", people=3)
    found = {s.scope: s for s in suggest(rows, NOW)}
    ours = found["send_email to *@example.com"]
    assert ours.text() == ("send_email to *@example.com: approved 23 times by 4 people in 14 days, never rejected, "
                           "edited once: allow it?")
    assert ours.rule() == {"name": "allow-send-email-example-com", "tool": "send_email",
                           "params": {"to": {"glob": "*@example.com"}}, "effect": "allow"}
    assert "send_email to *@other.org" in found


def test_thresholds_come_from_settings() -> None:
    rows = history(5, people=2)
    assert suggest(rows, NOW) == []
    assert [s.effect for s in suggest(rows, NOW, Thresholds(min_approvals=5, min_people=2))] == ["allow"]


GRANT_CASES = [
    # (name, history, days, expected scope, scope value, expiry)
    ("one channel's evidence: that channel", history(20), 30, Scope.CHANNEL, "C1", timedelta(days=30)),
    ("two channels' evidence: everyone", history(20, channels=("C1", "C2")), 7, Scope.EVERYONE, None,
     timedelta(days=7)),
    ("no expiry setting: until revoked", history(20), None, Scope.CHANNEL, "C1", None),
]


@pytest.mark.parametrize(("name", "rows", "days", "scope", "value", "lasts"), GRANT_CASES,
                         ids=[c[0] for c in GRANT_CASES])
def test_the_grant_a_suggestion_makes_is_exactly_its_rule(name: str, rows: list[Decided], days: int | None,
                                                          scope: Scope, value: str | None,
                                                          lasts: timedelta | None) -> None:
    [found] = suggest(rows, NOW)
    grant = suggested_grant(found, grant_id=grant_prefix(found) + "0", by="U7", now=NOW, days=days)
    assert (grant.tool, grant.match_json(), grant.any_other_params) == (
        "send_email", {"to": {"op": "glob", "value": "*@example.com"}}, True)
    assert (grant.scope, grant.scope_value, grant.created_by) == (scope, value, "U7")
    assert (grant.expires_at - NOW if grant.expires_at else None) == lasts
    # It allows what the rule allows (other parameters: any), and nothing at another domain.
    assert grant.matches("send_email", {"to": "New@Example.com", "subject": "x", "cc": "y"})
    assert not grant.matches("send_email", {"to": "a@example.org"}) and not grant.matches("send_mail", {"to": "a@example.com"})
    assert len(grant.id) <= 40 and len(grant_prefix(found) + "999") <= 40


def test_the_grant_prefix_names_what_it_allows_and_where() -> None:
    one, = suggest(history(20), NOW)
    again, = suggest(history(25, people=5), NOW)  # other evidence, the same grant
    wider, = suggest(history(20, channels=("C1", "C2")), NOW)
    other, = suggest(history(20, to="x{n}@other.org"), NOW)
    assert grant_prefix(one) == grant_prefix(again) and one.key == again.key
    assert len({grant_prefix(one), grant_prefix(wider), grant_prefix(other)}) == 3
    assert one.key == '["allow","send_email",{"to":"*@example.com"},"C1"]'
    assert wider.key == '["allow","send_email",{"to":"*@example.com"},"*"]'  # the key names where it holds
    deny, = suggest(history(0, 6, tool="db_exec", to="x{n}@prod.example"), NOW)
    assert grant_prefix(deny) != grant_prefix(one)
    # A deny's grant: the same match, scope and expiry, with effect deny (it denies, never allows).
    made = suggested_grant(deny, grant_id=grant_prefix(deny) + "0", by="U1", now=NOW, days=1)
    assert (made.effect, made.match_json(), made.scope, made.scope_value, made.expires_at) == (
        "deny", {"to": {"op": "glob", "value": "*@prod.example"}}, Scope.CHANNEL, "C1", NOW + timedelta(days=1))
    assert made.denies("db_exec", {"to": "a@prod.example", "sql": "x"}) and not made.matches("db_exec", {"to": "a@prod.example"})
    assert made.describe() == "denies db_exec with to matches *@prod.example (other parameters: any)"


def test_thresholds_and_the_grant_expiry_are_settings_checked_at_start() -> None:
    base = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}
    settings = Settings.from_env({**base, "SIGNOFF_SUGGEST_DAYS": "30", "SIGNOFF_SUGGEST_MIN_APPROVALS": "5",
                                  "SIGNOFF_SUGGEST_MIN_PEOPLE": "2", "SIGNOFF_SUGGEST_MAX_EDITS": "0",
                                  "SIGNOFF_SUGGEST_MIN_REJECTIONS": "3", "SIGNOFF_SUGGEST_MIN_REJECT_SHARE": "0.9",
                                  "SIGNOFF_SUGGEST_GRANT_DAYS": "0"}, dotenv=None)
    assert settings.suggest == Thresholds(days=30, min_approvals=5, min_people=2, max_edits=0, min_rejections=3,
                                          min_reject_share=0.9)
    assert settings.suggest_grant_days is None  # 0: until revoked
    assert Settings.from_env(base, dotenv=None).suggest_grant_days == 30
    for name, value in (("SIGNOFF_SUGGEST_MIN_APPROVALS", "0"), ("SIGNOFF_SUGGEST_DAYS", "two weeks"),
                        ("SIGNOFF_SUGGEST_MIN_REJECT_SHARE", "0.3")):
        with pytest.raises(SettingsError) as error:
            Settings.from_env({**base, name: value}, dotenv=None)
        assert name in str(error.value)
