"""The policy file: every bad file is refused with one line naming file, line and problem; the
`signoff policy check|explain` commands (real subprocesses); start-up refuses a bad file."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bot.domain.model import Risk
from bot.domain.policy import Effect
from bot.policy.file import PolicyError, load_policy, parse_policy
from tests.support.docs import fenced, page
from tests.support.app import ROOT

GOOD = """\
default_tier: high
tiers:
  critical:
    approvers: [U1, U2]
    quorum: 2
    confirm: "{params.resource}"
rules:
  - name: no-prod-drops
    tool: "db_*"
    params:
      database: {glob: "prod*"}
    effect: deny
  - name: small-refunds
    tool: refund
    params: {amount: {le: 100}}
    effect: allow
    tier: medium
"""

# (name, file text, line, words the message must contain)
BAD = [
    ("unknown-top-key", "rulez: []\n", 1, "unknown key 'rulez'"),
    ("unknown-rule-key", "rules:\n  - name: a\n    tool: x\n    effect: deny\n    colour: red\n", 5,
     "unknown key 'colour'"),
    ("bad-regex", "rules:\n  - name: a\n    tool: x\n    params:\n      to: {regex: \"(open\"}\n    effect: deny\n",
     5, "bad regex"),
    ("unknown-tier-in-rule", "rules:\n  - name: a\n    tool: x\n    tier: severe\n", 4, "unknown tier 'severe'"),
    ("unknown-tier-section", "tiers:\n  urgent: {quorum: 1}\n", 2, "unknown key 'urgent'"),
    ("unknown-default-tier", "default_tier: extreme\n", 1, "unknown tier 'extreme'"),
    ("quorum-over-approvers", "tiers:\n  high:\n    approvers: [U1]\n    quorum: 2\n", 2,
     "quorum 2 is larger than the 1 approver"),
    ("bad-effect", "rules:\n  - name: a\n    tool: x\n    effect: maybe\n", 4, "effect"),
    ("rule-does-nothing", "rules:\n  - name: a\n    tool: x\n", 2, "needs an effect"),
    ("duplicate-name", "rules:\n  - {name: a, tool: x, effect: deny}\n  - {name: a, tool: y, effect: ask}\n", 3,
     "already the name"),
    ("duplicate-key", "rules:\n  - name: a\n    tool: x\n    tool: y\n    effect: deny\n", 4, "duplicate key 'tool'"),
    ("bad-yaml", "rules:\n  - name: a\n   tool: [x\n", 3, "not valid YAML"),
    ("not-a-mapping", "- a\n- b\n", 1, "must be a mapping"),
    ("bad-approver", "tiers:\n  high: {approvers: [bob]}\n", 2, "not a Slack user id"),
    ("bad-match-key", "rules:\n  - name: a\n    tool: x\n    params:\n      n: {between: [1, 2]}\n    effect: deny\n",
     5, "unknown key 'between'"),
    ("comparison-not-number", "rules:\n  - name: a\n    tool: x\n    params:\n      n: {gt: ten}\n    effect: deny\n",
     5, "gt must be a number"),
    ("bad-confirm-placeholder", "tiers:\n  critical: {confirm: \"{user}\"}\n", 2, "unknown placeholder"),
    ("bad-duration", "tiers:\n  high: {reminders: {every: soon}}\n", 2, "reminders"),
    ("approve-timeout-on-high", "tiers:\n  high: {timeout: {after: 1h, outcome: approve}}\n", 2, "low tier"),
    ("allow-critical", "rules:\n  - {name: a, tool: x, effect: allow, tier: critical}\n", 2, "critical"),
    ("empty-condition", "rules:\n  - name: a\n    tool: x\n    params:\n      n: {}\n    effect: deny\n", 5,
     "empty condition"),
]


def test_good_file_loads() -> None:
    policy = parse_policy(GOOD, "good.yaml")
    assert [r.name for r in policy.rules] == ["no-prod-drops", "small-refunds"]
    assert [r.line for r in policy.rules] == [8, 13]
    assert policy.tier(Risk.CRITICAL).quorum == 2 and policy.rules[1].effect is Effect.ALLOW


@pytest.mark.parametrize(("text", "line", "words"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_file_names_file_line_and_problem(tmp_path: Path, text: str, line: int, words: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    message = str(info.value)
    assert "\n" not in message, message
    assert message.startswith(f"{path}:{line}: "), message
    assert words in message, message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read the file"):
        load_policy(tmp_path / "nope.yaml")


def signoff(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    full.pop("SIGNOFF_POLICY", None) if env is None or "SIGNOFF_POLICY" not in env else None
    return subprocess.run([sys.executable, "-m", "bot", *args], capture_output=True, text=True, env=full,
                          cwd=ROOT, timeout=60)


def test_policy_check_command(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(GOOD)
    bad.write_text(BAD[2][1])
    ok = signoff("policy", "check", str(good))
    assert ok.returncode == 0 and "OK (2 rules" in ok.stdout
    one = tmp_path / "one.yaml"
    one.write_text("rules:\n  - name: only\n    tool: Bash\n    effect: deny\n")
    assert "OK (1 rule, default tier" in signoff("policy", "check", str(one)).stdout
    refused = signoff("policy", "check", str(bad))
    assert refused.returncode == 1
    assert refused.stderr.strip().startswith(f"{bad}:5: ") and "bad regex" in refused.stderr


def test_policy_explain_command(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(GOOD)
    denied = signoff("policy", "explain", "--action", "db_exec", "--params", '{"database": "prod-1"}',
                     "--requester", "U1", "--channel", "C1", env={"SIGNOFF_POLICY": str(path)})
    assert denied.returncode == 0, denied.stderr
    assert "outcome: deny" in denied.stdout and "rule:    no-prod-drops" in denied.stdout
    assert "(line 8)" in denied.stdout
    allowed = signoff("policy", "explain", "--policy", str(path), "--action", "refund", "--params", '{"amount": 40}')
    assert "outcome: allow" in allowed.stdout and "tier:    medium" in allowed.stdout and "fyi:" in allowed.stdout
    asked = signoff("policy", "explain", "--policy", str(path), "--action", "drop", "--params",
                    '{"resource": "orders"}', "--risk", "critical")
    assert "outcome: ask" in asked.stdout and "tier default" in asked.stdout
    assert "quorum 2" in asked.stdout and "'orders'" in asked.stdout
    bad_json = signoff("policy", "explain", "--policy", str(path), "--action", "x", "--params", "{nope")
    assert bad_json.returncode == 2 and "--params is not JSON" in bad_json.stderr


def test_serve_refuses_a_bad_policy_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(textwrap.dedent("""\
        rules:
          - name: a
            tool: x
            tier: severe
        """))
    env = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": "s", "SIGNOFF_POLICY": str(path),
           "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}", "PORT": "0", "SIGNOFF_HOST": "127.0.0.1"}
    done = signoff("serve", env=env)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"signoff: {path}:4: rules.0.tier: unknown tier 'severe' (one of: low, medium, high, critical)"


def test_readme_policy_example_and_explain(tmp_path: Path) -> None:
    """The policy page's file loads, and `policy explain` prints what the page shows."""
    section = page("docs/policy.md")
    example = fenced(section, "yaml") + "\n"
    path = tmp_path / "policy.yaml"
    path.write_text(example)
    assert signoff("policy", "check", str(path)).returncode == 0
    shown = section[section.index("# outcome: deny"):section.index("kill -HUP")]
    expected = [line.removeprefix("# ") for line in shown.strip().splitlines()]
    done = signoff("policy", "explain", "--policy", str(path), "--action", "db_exec", "--params",
                   '{"database": "prod-eu", "statement": "DROP TABLE users"}', "--requester", "support-bot")
    assert done.stdout.strip().splitlines() == expected


def test_grant_admins_are_slack_ids_checked_like_approvers() -> None:
    policy = parse_policy("grant_admins: [U5, SADMINS, U5]\nrules: []\n")
    assert policy.grant_admins == ("U5", "SADMINS")  # each once, in order
    assert parse_policy("rules: []\n").grant_admins == ()
    with pytest.raises(PolicyError) as bad:
        parse_policy("rules: []\ngrant_admins:\n  - alice\n", "p.yaml")
    assert str(bad.value).startswith("p.yaml:2: grant_admins:") and "'alice' is not a Slack user id" in str(bad.value)
