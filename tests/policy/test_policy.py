"""Policy decisions, table-driven: one policy file, one grant set, one clock; each row a call and
what `evaluate` must answer (outcome, tier, and the rule or grant that made it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.domain.grants import Delegation, FieldMatch, Grant, GrantIndex, Scope, delegates_for, generalise
from bot.domain.model import Risk
from bot.domain.policy import Call, Effect, evaluate, render_confirm
from bot.policy.file import parse_policy

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

POLICY = parse_policy(r"""
default_tier: high
tiers:
  medium: {approvers: [U1]}
  high:
    approvers: [U1, S2]
    reminders: {every: 30m, max: 2}
  critical:
    approvers: [U1, U2, U3]
    quorum: 2
    confirm: "{params.resource}"
    timeout: {after: 2h, outcome: reject}
rules:
  - name: never-drop-prod
    tool: "db_*"
    params: {database: {glob: "prod*"}, statement: {regex: "(?i)\\bdrop\\b"}}
    effect: deny
    reason: production tables are never dropped by an agent
  - name: no-wire-over-10k
    tool: wire_transfer
    params: {amount: {gt: 10000}}
    effect: deny
  - name: wire-mid-asks
    tool: wire_transfer
    params: {amount: {ge: 1000, le: 10000}}
    effect: ask
    tier: critical
  - name: small-wires
    tool: wire_transfer
    params: {amount: {lt: 1000}, currency: [USD, EUR]}
    effect: allow
    tier: medium
  - name: internal-mail
    tool: send_email
    params: {to: {glob: "*@example.com"}}
    effect: allow
  - name: mail-to-press-asks
    tool: send_email
    params: {to: {glob: "*@press.*"}}
    effect: ask
  - name: ci-bot-reads
    tool: "read_*"
    requester: "ci-*"
    effect: allow
    tier: low
  - name: ops-channel-restarts
    tool: restart_service
    channel: [C0PS, "C0PS2*"]
    effect: allow
  - name: restarts-elsewhere-critical
    tool: restart_service
    tier: critical
  - name: deploys-medium
    tool: "deploy_*"
    tier: medium
  - name: deploy-friday-freeze
    tool: deploy_prod
    params: {day: {any_of: [fri, sat, sun]}}
    effect: deny
  - name: nested-path
    tool: create_user
    params: {user.role: admin}
    effect: ask
  - name: exact-flag
    tool: toggle
    params: {enabled: true}
    effect: deny
  - name: question-mark-glob
    tool: "tool_?"
    effect: allow
    tier: low
  - name: requester-user-rule
    tool: approve_invoice
    requester: U9BOSS
    effect: deny
""", "unit.yaml")


def grant(gid: str, tool: str, match: dict[str, FieldMatch], *, scope: Scope = Scope.EVERYONE,
          scope_value: str | None = None, expires: timedelta | None = None, revoked: bool = False,
          created: timedelta = timedelta(days=-1)) -> Grant:
    return Grant(gid, tool, match, scope, scope_value, "U1", NOW + created,
                 expires_at=NOW + expires if expires is not None else None,
                 revoked_at=NOW - timedelta(minutes=1) if revoked else None)


GRANTS = GrantIndex([
    grant("grt_mail", "send_email", {"to": FieldMatch("glob", "*@partner.io"), "subject": FieldMatch("eq", "Hi")}),
    grant("grt_expired", "post_tweet", {"text": FieldMatch("eq", "hello")}, expires=timedelta(seconds=-1)),
    grant("grt_revoked", "post_tweet", {"text": FieldMatch("eq", "bye")}, revoked=True),
    grant("grt_future_expiry", "post_tweet", {"text": FieldMatch("eq", "soon")}, expires=timedelta(hours=1)),
    grant("grt_db", "db_exec", {"database": FieldMatch("eq", "prod1"), "statement": FieldMatch("glob", "*")}),
    grant("grt_channel", "open_ticket", {"title": FieldMatch("glob", "*")}, scope=Scope.CHANNEL, scope_value="C1"),
    grant("grt_run", "write_file", {"path": FieldMatch("glob", "/tmp/*")}, scope=Scope.RUN, scope_value="run_1"),
    grant("grt_agent", "fetch_url", {"url": FieldMatch("glob", "https://docs.*")}, scope=Scope.AGENT,
          scope_value="docs-agent"),
    grant("grt_restart", "restart_service", {"name": FieldMatch("eq", "web")}),
    grant("grt_wire", "wire_transfer", {"amount": FieldMatch("eq", 20000)}),
    grant("grt_wire_mid", "wire_transfer", {"amount": FieldMatch("eq", 5000)}),
    grant("grt_nested", "create_user", {"user": FieldMatch("eq", {"role": "admin", "name": "x"})}),
])


@dataclass(frozen=True)
class Case:
    id: str
    tool: str
    params: dict[str, Any] = field(default_factory=dict)
    outcome: Effect = Effect.ASK
    tier: Risk = Risk.HIGH
    rule: str | None = None
    grant: str | None = None
    risk: Risk | None = None
    requester: str | None = None  # who the agent is (its token's name: Call.agent)
    requester_user: str | None = None
    label: str | None = None  # requested_by: a display label, never an identity
    channel: str | None = "C1"
    run_id: str | None = None
    destructive: bool | None = None
    fyi: bool = False


A, D, K = Effect.ALLOW, Effect.DENY, Effect.ASK
L, M, H, C = Risk.LOW, Risk.MEDIUM, Risk.HIGH, Risk.CRITICAL
DROP = {"database": "prod-eu", "statement": "DROP TABLE users"}

CASES = [
    # deny beats everything: rules after it, grants, the API's risk, the tier
    Case("deny-glob-and-regex", "db_exec", DROP, D, H, rule="never-drop-prod"),
    Case("deny-beats-low-api-risk", "db_exec", DROP, D, L, rule="never-drop-prod", risk=L),
    Case("deny-beats-grant", "db_exec", {"database": "prod1", "statement": "drop table x"}, D, H, "never-drop-prod"),
    Case("deny-regex-case-insensitive-flag", "db_query", {"database": "prod", "statement": "Drop view v"}, D, H,
         "never-drop-prod"),
    Case("deny-glob-case-insensitive", "db_exec", {"database": "PROD-1", "statement": "drop x"}, D, H,
         "never-drop-prod"),
    Case("deny-regex-word-boundary-misses", "db_exec", {"database": "prod1", "statement": "select dropped"}, A, H,
         grant="grt_db"),
    Case("deny-glob-misses-staging", "db_exec", {"database": "staging", "statement": "drop table x"}, K, H),
    Case("deny-missing-param-does-not-match", "db_exec", {"database": "prod1"}, K, H),
    Case("deny-gt", "wire_transfer", {"amount": 10001}, D, H, "no-wire-over-10k"),
    Case("deny-gt-string-number", "wire_transfer", {"amount": "50000"}, D, H, "no-wire-over-10k"),
    Case("deny-beats-exact-grant", "wire_transfer", {"amount": 20000}, D, H, "no-wire-over-10k"),
    Case("deny-beats-destructive-hint", "wire_transfer", {"amount": 99999}, D, H, "no-wire-over-10k",
         destructive=True),
    Case("deny-any-of", "deploy_prod", {"day": "sat"}, D, M, "deploy-friday-freeze"),
    Case("deny-later-in-file-still-wins", "deploy_prod", {"day": "fri"}, D, M, "deploy-friday-freeze",
         risk=L),
    Case("deny-exact-bool", "toggle", {"enabled": True}, D, H, "exact-flag"),
    # 1 is not true, but a tool may read it so: the deny cannot judge it and fails closed (issue 33)
    Case("exact-bool-int-fails-closed", "toggle", {"enabled": 1}, D, H, "exact-flag"),
    Case("exact-bool-zero-not-true", "toggle", {"enabled": 0}, K, H),
    Case("deny-requester-user", "approve_invoice", {}, D, H, "requester-user-rule", requester_user="U9BOSS"),
    Case("deny-requester-by-name", "approve_invoice", {}, D, H, "requester-user-rule", requester="U9BOSS"),
    Case("requester-label-never-matches", "approve_invoice", {}, K, H, label="U9BOSS"),
    Case("requester-label-not-the-agent", "read_file", {"path": "a"}, K, H, label="ci-nightly"),
    Case("requester-other-asks", "approve_invoice", {}, K, H, requester="U1"),
    # comparisons at the edges
    Case("le-boundary-asks", "wire_transfer", {"amount": 10000}, K, C, "wire-mid-asks"),
    Case("ge-boundary-asks", "wire_transfer", {"amount": 1000}, K, C, "wire-mid-asks"),
    Case("ask-rule-beats-grant", "wire_transfer", {"amount": 5000}, K, C, "wire-mid-asks"),
    Case("lt-allows-with-fyi", "wire_transfer", {"amount": 999.99, "currency": "EUR"}, A, M, "small-wires", fyi=True),
    Case("lt-any-of-misses", "wire_transfer", {"amount": 10, "currency": "GBP"}, K, H),
    Case("comparison-on-text-misses", "wire_transfer", {"amount": "ten", "currency": "USD"}, K, H),
    Case("comparison-on-bool-misses", "wire_transfer", {"amount": True, "currency": "USD"}, K, H),
    Case("comparison-nan-text-misses", "wire_transfer", {"amount": "nan", "currency": "USD"}, K, H),
    # allow and ask rules, globs
    Case("allow-glob", "send_email", {"to": "ann@example.com"}, A, H, "internal-mail", fyi=True),
    Case("allow-glob-case", "send_email", {"to": "Ann@EXAMPLE.com"}, A, H, "internal-mail", fyi=True),
    Case("glob-lookalike-domain-asks", "send_email", {"to": "ann@example.com.evil.io"}, K, H),
    Case("ask-rule", "send_email", {"to": "desk@press.co"}, K, H, "mail-to-press-asks"),
    Case("ask-rule-before-grant", "send_email", {"to": "x@press.partner.io", "subject": "Hi"}, K, H,
         "mail-to-press-asks"),
    Case("no-rule-default-high-asks", "send_email", {"to": "someone@else.org"}, K, H),
    Case("tool-glob-star", "read_file", {"path": "a"}, A, L, "ci-bot-reads", requester="ci-nightly"),
    Case("tool-glob-other-requester", "read_file", {"path": "a"}, K, H, requester="dev-agent"),
    Case("tool-glob-no-requester", "read_file", {"path": "a"}, K, H),
    Case("tool-glob-question-mark", "tool_x", {}, A, L, "question-mark-glob"),
    Case("tool-glob-question-mark-two-chars", "tool_xy", {}, K, H),
    Case("tool-names-case-sensitive", "Read_file", {}, K, H, requester="ci-x"),
    # channels
    Case("channel-exact", "restart_service", {"name": "db"}, A, C, "ops-channel-restarts", channel="C0PS",
         fyi=True),
    Case("channel-glob", "restart_service", {"name": "db"}, A, C, "ops-channel-restarts", channel="C0PS2X",
         fyi=True),
    Case("channel-other-critical", "restart_service", {"name": "db"}, K, C, channel="C9"),
    Case("channel-missing", "restart_service", {"name": "db"}, K, C, channel=None),
    Case("critical-ignores-grant", "restart_service", {"name": "web"}, K, C, channel="C9"),
    # tiers from rules and inputs
    Case("tier-only-rule-medium-default-allows", "deploy_staging", {}, A, M, fyi=True),
    Case("tier-rule-beats-api-risk", "deploy_staging", {}, A, M, risk=C, fyi=True),
    Case("api-risk-low-allows", "noop", {}, A, L, risk=L),
    Case("api-risk-medium-fyi", "noop", {}, A, M, risk=M, fyi=True),
    Case("api-risk-high-asks", "noop", {}, K, H, risk=H),
    Case("api-risk-critical-asks", "noop", {}, K, C, risk=C),
    Case("destructive-raises-low-to-high", "noop", {}, K, H, risk=L, destructive=True),
    Case("destructive-keeps-critical", "noop", {}, K, C, risk=C, destructive=True),
    Case("nested-param-path-asks", "create_user", {"user": {"role": "admin", "name": "x"}}, K, H, "nested-path"),
    Case("nested-param-other-role-grant-none", "create_user", {"user": {"role": "dev"}}, K, H),
    # grants: match, scope, expiry, revocation
    Case("grant-glob-and-exact", "send_email", {"to": "bo@partner.io", "subject": "Hi"}, A, H, grant="grt_mail"),
    Case("grant-glob-case", "send_email", {"to": "BO@PARTNER.IO", "subject": "Hi"}, A, H, grant="grt_mail"),
    Case("grant-exact-differs", "send_email", {"to": "bo@partner.io", "subject": "Hi!"}, K, H),
    Case("grant-extra-param-never-widens", "send_email", {"to": "bo@partner.io", "subject": "Hi", "bcc": "x"}, K, H),
    Case("grant-missing-param", "send_email", {"to": "bo@partner.io"}, K, H),
    Case("grant-expired", "post_tweet", {"text": "hello"}, K, H),
    Case("grant-revoked", "post_tweet", {"text": "bye"}, K, H),
    Case("grant-not-yet-expired", "post_tweet", {"text": "soon"}, A, H, grant="grt_future_expiry"),
    Case("grant-low-api-risk-no-fyi", "post_tweet", {"text": "soon"}, A, L, grant="grt_future_expiry", risk=L),
    Case("grant-critical-api-risk-asks", "post_tweet", {"text": "soon"}, K, C, risk=C),
    Case("grant-channel-scope", "open_ticket", {"title": "t"}, A, H, grant="grt_channel", channel="C1"),
    Case("grant-channel-scope-other", "open_ticket", {"title": "t"}, K, H, channel="C2"),
    Case("grant-run-scope", "write_file", {"path": "/tmp/a"}, A, H, grant="grt_run", run_id="run_1"),
    Case("grant-run-scope-other-run", "write_file", {"path": "/tmp/a"}, K, H, run_id="run_2"),
    Case("grant-run-scope-glob-misses", "write_file", {"path": "/etc/passwd"}, K, H, run_id="run_1"),
    Case("grant-agent-scope", "fetch_url", {"url": "https://docs.rs"}, A, H, grant="grt_agent",
         requester="docs-agent", label="any label"),
    Case("grant-agent-scope-other", "fetch_url", {"url": "https://docs.rs"}, K, H, requester="web-agent"),
    Case("grant-agent-scope-label-is-not-the-agent", "fetch_url", {"url": "https://docs.rs"}, K, H,
         label="docs-agent", requester="web-agent"),
    Case("grant-agent-scope-no-token-no-agent", "fetch_url", {"url": "https://docs.rs"}, K, H, label="docs-agent"),
    Case("grant-nested-exact", "create_user", {"user": {"name": "x", "role": "admin"}}, K, H, "nested-path"),
    Case("grant-type-strict", "wire_transfer", {"amount": "5000"}, K, C, "wire-mid-asks"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_policy_decision(case: Case) -> None:
    call = Call(tool=case.tool, params=case.params, risk=case.risk, destructive=case.destructive,
                requester=case.label, agent=case.requester, requester_user=case.requester_user,
                channel=case.channel, run_id=case.run_id)
    result = evaluate(POLICY, call, GRANTS, NOW)
    assert (result.outcome, result.tier, result.rule, result.grant_id, result.fyi) == (
        case.outcome, case.tier, case.rule, case.grant, case.fyi), result.reason


def test_at_least_sixty_decisions() -> None:
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)


def test_ask_carries_the_tiers_settings() -> None:
    result = evaluate(POLICY, Call("wire_transfer", {"amount": 5000, "resource": "acct-9"}), GRANTS, NOW)
    assert result.outcome is Effect.ASK and result.tier is Risk.CRITICAL
    assert (result.approvers, result.quorum, result.requester_may_approve) == (("U1", "U2", "U3"), 2, False)
    assert result.confirm == "acct-9"
    assert result.timeout == (timedelta(hours=2), result.timeout[1]) and result.timeout[1].value == "rejected"
    high = evaluate(POLICY, Call("noop", {}), None, NOW)
    assert high.approvers == ("U1", "S2") and high.reminders == (timedelta(minutes=30), 2)


def test_confirm_templates() -> None:
    call = Call("drop_db", {"name": "orders", "n": 3})
    assert render_confirm("{params.name}", call) == "orders"
    assert render_confirm("DELETE {params.n} from {action}", call) == "DELETE 3 from drop_db"
    assert render_confirm("{params.missing}", call) == "drop_db"
    assert render_confirm(None, call) is None


def test_without_grants_index() -> None:
    result = evaluate(POLICY, Call("send_email", {"to": "bo@partner.io", "subject": "Hi"}), None, NOW)
    assert result.outcome is Effect.ASK


def test_revoked_at_the_instant() -> None:
    g = grant("grt_x", "t", {}, revoked=False)
    index = GrantIndex([g])
    assert evaluate(POLICY, Call("t", {}), index, NOW).grant_id == "grt_x"
    revoked = GrantIndex([Grant(**{**g.__dict__, "revoked_at": NOW})])
    assert evaluate(POLICY, Call("t", {}), revoked, NOW).outcome is Effect.ASK


def test_generalise_only_as_chosen() -> None:
    params = {"to": "ann@Example.com", "subject": "Hi", "n": 3}
    match = generalise(params, {"to": "domain"})
    assert match["to"] == FieldMatch("glob", "*@example.com") and match["subject"] == FieldMatch("eq", "Hi")
    assert match["n"] == FieldMatch("eq", 3)
    with pytest.raises(ValueError):
        generalise(params, {"n": "any"})  # a number cannot become "any text"
    with pytest.raises(ValueError):
        generalise(params, {"subject": "domain"})
    with pytest.raises(ValueError):
        generalise(params, {"nope": "any"})


WINDOW = [
    Delegation("U1", "U2", NOW - timedelta(days=1), until=NOW + timedelta(days=1)),
    Delegation("U3", "U4", NOW - timedelta(days=2), until=NOW - timedelta(seconds=1)),  # ran out
    Delegation("U5", "U6", NOW + timedelta(hours=1), until=NOW + timedelta(days=3)),  # not started
    Delegation("U7", "U8", NOW - timedelta(days=1), until=None, ended_at=NOW - timedelta(minutes=5)),  # came back
    Delegation("U9", "U10", NOW - timedelta(days=1), until=None),  # until they come back
    Delegation("U11", "U11", NOW - timedelta(days=1)),  # to themselves: ignored
]


@pytest.mark.parametrize(("people", "delegates"), [
    (["U1"], ["U2"]), (["U3"], []), (["U5"], []), (["U7"], []), (["U9"], ["U10"]), (["U11"], []),
    (["U1", "U9", "U3"], ["U2", "U10"]), (["U2"], []),
], ids=["active", "window-ended", "window-not-started", "came-back", "open-ended", "self", "several",
        "delegate-is-not-away"])
def test_delegation_windows(people: list[str], delegates: list[str]) -> None:
    assert [d.delegate for d in delegates_for(people, WINDOW, NOW)] == delegates


def test_delegation_window_edges() -> None:
    d = Delegation("U1", "U2", NOW, until=NOW + timedelta(hours=1))
    assert d.active(NOW) and not d.active(NOW - timedelta(microseconds=1))
    assert not d.active(NOW + timedelta(hours=1))


def deny(gid: str, tool: str, match: dict[str, FieldMatch], **kw: Any) -> Grant:
    """A person's deny from the decision record: other parameters any, as a suggestion's grant."""
    made = grant(gid, tool, match, **kw)
    return Grant(**{**made.__dict__, "any_other_params": True, "effect": "deny"})


DENIES = GrantIndex([
    deny("grt_deny_mail", "send_email", {"to": FieldMatch("glob", "*@example.com")}, scope=Scope.CHANNEL,
         scope_value="C1"),
    grant("grt_allow_mail", "send_email", {"to": FieldMatch("glob", "*@example.com")}, created=timedelta(days=-9)),
    deny("grt_deny_wire", "wire_transfer", {}),
    deny("grt_deny_old", "post_tweet", {}, expires=timedelta(seconds=-1)),
    deny("grt_deny_revoked", "open_ticket", {}, revoked=True),
])

DENY_CASES = [
    # (id, tool, params, channel, outcome, grant)
    ("deny grant beats an older allow grant and the allow rule", "send_email", {"to": "a@Example.com", "cc": "x"},
     "C1", Effect.DENY, "grt_deny_mail"),
    ("out of its channel it does not deny", "send_email", {"to": "a@example.com"}, "C9", Effect.ALLOW, "grt_allow_mail"),
    ("a value it cannot judge counts as matching", "send_email", {"to": ["a@example.com"]}, "C1", Effect.DENY,
     "grt_deny_mail"),
    ("another domain is not denied", "send_email", {"to": "a@example.org"}, "C1", Effect.ASK, None),
    ("without the parameter it names it does not deny", "send_email", {"subject": "x"}, "C1", Effect.ASK, None),
    ("at the critical tier it still denies", "wire_transfer", {"amount": 5000}, None, Effect.DENY, "grt_deny_wire"),
    ("an expired deny denies nothing", "post_tweet", {"text": "hi"}, None, Effect.ASK, None),
    ("a revoked deny denies nothing", "open_ticket", {"title": "x"}, None, Effect.ASK, None),
]


@pytest.mark.parametrize(("name", "tool", "params", "channel", "outcome", "grant_id"), DENY_CASES,
                         ids=[c[0] for c in DENY_CASES])
def test_deny_grants_only_ever_make_a_call_stricter(name: str, tool: str, params: dict[str, Any], channel: str | None,
                                                    outcome: Effect, grant_id: str | None) -> None:
    result = evaluate(POLICY, Call(tool=tool, params=params, channel=channel), DENIES, NOW)
    assert (result.outcome, result.grant_id) == (outcome, grant_id), result.reason
    if outcome is Effect.DENY:
        assert result.reason == f"denied by grant {grant_id} (a person's deny, made by U1)"
    # A file deny rule still comes first (its reason, not the grant's).
    dropped = evaluate(POLICY, Call("db_exec", {"database": "prod1", "statement": "DROP t"}),
                       GrantIndex([deny("grt_deny_db", "db_exec", {})]), NOW)
    assert (dropped.rule, dropped.grant_id) == ("never-drop-prod", None)
