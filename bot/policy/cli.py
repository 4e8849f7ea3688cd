"""`signoff policy check FILE` and `signoff policy explain ...`: the policy file, offline.

    signoff policy check policy.yaml
        exit 0 and a one-line summary, or exit 1 and `file:line: problem`
    signoff policy explain --action send_email --params '{"to": "a@example.com"}' \\
        [--requester NAME] [--channel C0123ABCD] [--risk high] [--asked-risk critical] [--destructive]
        [--policy FILE]
        the outcome, the tier and the rule (or tier default) that made it; exit 0 (1 on a bad file)

    signoff policy suggest [--days 14] [--min-approvals 20] [--min-people 3] [--max-edits 1]
        [--min-rejections 5]
        what people's decisions in the database (DATABASE_URL) say policy could allow or deny,
        as rules to paste into the policy file (never for the critical tier); each flag defaults
        to the server's SIGNOFF_SUGGEST_* setting (what App Home and the digest offer)

`explain` reads SIGNOFF_POLICY unless --policy is given. Remembered grants live in the database
and are not consulted here: explain says what the file decides.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from bot.domain.history import Thresholds
from bot.domain.model import Risk

# Every other command of `signoff` builds this command's parser too: what only running it needs (the
# policy file's parser, the evaluator) is imported by the functions that run it.


def add_parser(sub: Any) -> None:
    policy = sub.add_parser("policy", help="check a policy file, or explain what it decides for a call")
    actions = policy.add_subparsers(dest="policy_command", required=True)
    check = actions.add_parser("check", help="validate a policy file (exit 1 naming file, line and problem)")
    check.add_argument("file")
    explain = actions.add_parser("explain", help="print the outcome for one call and the rule that made it")
    explain.add_argument("--action", required=True, help="the tool name")
    explain.add_argument("--params", default="{}", help="the parameters, as a JSON object")
    explain.add_argument("--requester", help="who asks: an API token's name, or the Slack user id of the person "
                                             "who started Signoff's run (never a requested_by label)")
    explain.add_argument("--channel", help="the Slack channel id")
    explain.add_argument("--risk", choices=[r.value for r in Risk],
                         help="the tool's declared risk (Signoff's runner: operator config)")
    explain.add_argument("--asked-risk", choices=[r.value for r in Risk],
                         help="the agent's risk (API body, MCP argument): only ever raises the tier")
    explain.add_argument("--destructive", action="store_true", help="the tool says it is destructive")
    explain.add_argument("--policy", help="the policy file (default: $SIGNOFF_POLICY)")
    suggest = actions.add_parser("suggest", help="rules the decision record supports, as a policy-file snippet")
    d = Thresholds()
    for flag, default, setting in (("--days", d.days, "DAYS"), ("--min-approvals", d.min_approvals, "MIN_APPROVALS"),
                                   ("--min-people", d.min_people, "MIN_PEOPLE"), ("--max-edits", d.max_edits, "MAX_EDITS"),
                                   ("--min-rejections", d.min_rejections, "MIN_REJECTIONS")):
        suggest.add_argument(flag, type=int, default=None,
                             help=f"default: SIGNOFF_SUGGEST_{setting}, else {default}")


def run(args: argparse.Namespace) -> int:
    if args.policy_command == "check":
        return _check(args.file)
    if args.policy_command == "suggest":
        return asyncio.run(_suggest(args))
    return _explain(args)


def _check(path: str) -> int:
    from bot.policy.file import PolicyError, load_policy

    try:
        policy = load_policy(path)
    except PolicyError as exc:
        print(exc, file=sys.stderr)
        return 1
    count = len(policy.rules)
    print(f"{path}: OK ({count} rule{'' if count == 1 else 's'}, default tier {policy.default_tier.value})")
    return 0


def _explain(args: argparse.Namespace) -> int:
    from bot.domain.duties import SLACK_USER_ID
    from bot.domain.policy import Call, Effect, evaluate
    from bot.policy.file import PolicyError, load_policy

    path = args.policy or os.environ.get("SIGNOFF_POLICY")
    if not path:
        print("signoff: no policy file: pass --policy FILE or set SIGNOFF_POLICY", file=sys.stderr)
        return 2
    try:
        policy = load_policy(path)
    except PolicyError as exc:
        print(exc, file=sys.stderr)
        return 1
    try:
        params = json.loads(args.params)
    except ValueError as exc:
        print(f"signoff: --params is not JSON: {exc}", file=sys.stderr)
        return 2
    if not isinstance(params, dict):
        print("signoff: --params must be a JSON object", file=sys.stderr)
        return 2
    call = Call(tool=args.action, params=params, risk=Risk(args.risk) if args.risk else None,
                asked_risk=Risk(args.asked_risk) if args.asked_risk else None,
                destructive=args.destructive or None, agent=args.requester, channel=args.channel,
                requester_user=args.requester if args.requester and SLACK_USER_ID.match(args.requester) else None)
    result = evaluate(policy, call, None, datetime.now(UTC))
    print(f"outcome: {result.outcome.value}")
    print(f"tier:    {result.tier.value}")
    print(f"rule:    {result.rule or '(none: the tier default)'}")
    print(f"why:     {result.reason}")
    if result.outcome is Effect.ASK:
        print(f"asks:    {', '.join(result.approvers) or 'anyone in the channel'} (quorum {result.quorum}"
              + (f", type {result.confirm!r} to confirm" if result.confirm else "") + ")")
    elif result.fyi:
        print("fyi:     the channel is told after the fact")
    return 0


async def _suggest(args: argparse.Namespace) -> int:
    import yaml

    from bot.approvals.history import history_suggestions
    from bot.process.settings import SettingsError, database_url_from_env, suggest_from_env
    from bot.process.startup import StartupError, open_database

    try:
        base = suggest_from_env()  # the server's thresholds (SIGNOFF_SUGGEST_*), which flags override
    except SettingsError as exc:
        print(f"signoff: {exc}", file=sys.stderr)
        return 2
    given = {k: getattr(args, k) for k in ("days", "min_approvals", "min_people", "max_edits", "min_rejections")}
    thresholds = replace(base, **{k: v for k, v in given.items() if v is not None})
    try:
        store = await open_database(database_url_from_env(), migrate=False, must_exist=True)
    except (StartupError, SettingsError) as exc:
        print(f"signoff: {exc}", file=sys.stderr)
        return 2
    try:
        found = await history_suggestions(store, datetime.now(UTC), thresholds)
    finally:
        await store.close()
    if not found:
        print(f"# Nothing to suggest from the last {thresholds.days} days (allow: {thresholds.min_approvals}+ approvals "
              f"by {thresholds.min_people}+ people, never rejected; deny: {thresholds.min_rejections}+ rejections).")
        return 0
    print(f"# From people's decisions in the last {thresholds.days} days. Paste under `rules:` in the policy file.")
    for suggestion in found:
        print(f"# {suggestion.text()}")
        print(yaml.safe_dump([suggestion.rule()], sort_keys=False, allow_unicode=True).rstrip())
    return 0
