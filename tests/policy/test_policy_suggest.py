"""`signoff policy suggest` reads what people decided (signed Slack clicks on a running server) and
prints rules that paste into the policy file as they are: the pasted file is valid and the next
such request is allowed without a card, while the rest still asks."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.process.cli import clean_env, signoff
from tests.support.app import App
from tests.support.waits import until

PEOPLE = ["U1", "U2", "U3"]


async def decide(app: App, n: int, to: str, action: str = "signoff_approve") -> None:
    made = await app.submit(action={"name": "send_email", "params": {"to": to, "subject": f"Refund {n}"}},
                            approvers=PEOPLE, preview=None)
    await app.click(made["id"], PEOPLE[n % len(PEOPLE)], action)
    async def decided() -> bool:
        _, body = await app.api("GET", f"/api/v1/approvals/{made['id']}")
        return bool(body["status"] != "pending")

    await until(decided, f"{made['id']} to be decided")


async def test_suggested_rules_paste_into_the_policy_file_and_stop_the_asking(app: App, db_url: str,
                                                                           tmp_path: Path) -> None:
    for user in PEOPLE:
        app.slack.add_user(user, f"user{user}")
    for n in range(20):
        await decide(app, n, f"c{n}@example.com")
    for n in range(2):
        await decide(app, n, f"x{n}@other.org")
    done = await signoff("policy", "suggest", env=clean_env(DATABASE_URL=db_url), cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert ("# send_email to *@example.com: approved 20 times by 3 people in 14 days, never rejected, never edited: "
            "allow it?") in done.stdout, done.stdout
    assert "other.org" not in done.stdout  # two approvals are not evidence
    rules = yaml.safe_load(done.stdout)
    assert rules == [{"name": "allow-send-email-example-com", "tool": "send_email",
                      "params": {"to": {"glob": "*@example.com"}}, "effect": "allow"}]
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"default_tier": "high", "rules": rules}))
    checked = await signoff("policy", "check", str(policy), env=clean_env(), cwd=tmp_path)
    assert checked.code == 0, checked.stderr
    explained = await signoff("policy", "explain", "--policy", str(policy), "--action", "send_email",
                              "--params", '{"to": "new@example.com"}', env=clean_env(), cwd=tmp_path)
    assert "outcome: allow" in explained.stdout, explained.stdout
    other = await signoff("policy", "explain", "--policy", str(policy), "--action", "send_email",
                          "--params", '{"to": "new@other.org"}', env=clean_env(), cwd=tmp_path)
    assert "outcome: ask" in other.stdout, other.stdout


async def test_nothing_to_suggest_says_what_would_be_needed(app: App, db_url: str, tmp_path: Path) -> None:
    done = await signoff("policy", "suggest", "--days", "7", env=clean_env(DATABASE_URL=db_url), cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert done.stdout.startswith("# Nothing to suggest from the last 7 days"), done.stdout
