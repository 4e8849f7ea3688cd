"""The policy matcher under fuzz (issue 33): arbitrary conditions, paths and JSON parameters never
raise and never let an allow match what a deny with the same condition would not; and over HTTP, a
value a deny rule matches stays denied however the agent re-types, re-formats or re-places it.

    SIGNOFF_FUZZ_EXAMPLES   examples per test (default 120); the HTTP run uses a fifth of them
"""

from __future__ import annotations

import pytest

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.domain.matching import ValueMatch
from bot.domain.model import Risk
from bot.domain.policy import Call, Effect, Policy, Rule, evaluate
from bot.sandbox import SlackEmulator
from tests.support.fuzz import EXAMPLES, FUZZ_SETTINGS, ErrorLog, in_thread
from tests.api.test_api_fuzz import json_values
from tests.support.app import approval_body, policy_app
from tests.policy.strategies import matched, placed, retyped

pytestmark = pytest.mark.fuzz

NOW = datetime(2026, 12, 1, tzinfo=UTC)
paths = st.one_of(st.sampled_from(["amount", "to", "a.b", "a.b.c", "user.role", "", ".", "a..b", "A"]),
                  st.text(alphabet="ab.Ａ_", max_size=6))
conditions = st.builds(
    ValueMatch,
    any_of=st.one_of(st.none(), st.lists(json_values, min_size=1, max_size=3).map(tuple)),
    glob=st.one_of(st.none(), st.text(max_size=6)),
    regex=st.one_of(st.none(), st.sampled_from(["^(?!DE)", "(?i)drop", "^[0-9]+$", "", "a|b"])),
    lt=st.one_of(st.none(), st.floats(allow_nan=False)),
    ge=st.one_of(st.none(), st.integers(-10**30, 10**30).map(float)),
)


def decide(effect: Effect, path: str, condition: ValueMatch, params: dict[str, Any]) -> Effect:
    policy = Policy(rules=(Rule("r", tools=("t",), params=((path, condition),), effect=effect,
                                tier=Risk.LOW if effect is Effect.ALLOW else None),))
    return evaluate(policy, Call("t", params, risk=Risk.HIGH), None, NOW).outcome


@FUZZ_SETTINGS
@given(path=paths, condition=conditions, params=st.dictionaries(paths, json_values, max_size=4))
def test_the_matcher_never_raises_and_allow_implies_deny(path: str, condition: ValueMatch,
                                                         params: dict[str, Any]) -> None:
    allowed = decide(Effect.ALLOW, path, condition, params)
    denied = decide(Effect.DENY, path, condition, params)
    assert allowed in (Effect.ALLOW, Effect.ASK) and denied in (Effect.DENY, Effect.ASK)
    if allowed is Effect.ALLOW:
        assert denied is Effect.DENY, (path, condition, params)


async def test_a_denied_value_stays_denied_over_http(db_url: str, slack: SlackEmulator, tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    seen: dict[str, int] = {}

    async def check_one(spec: dict[str, Any], path: str, params: dict[str, Any]) -> dict[str, Any]:
        policy = f"rules:\n  - name: deny-it\n    tool: t\n    params: {{{json.dumps(path)}: {json.dumps(spec)}}}\n" \
                 "    effect: deny\n  - name: allow-it\n    tool: t\n    effect: allow\n    tier: low\n"
        async with policy_app(db_url, slack, tmp_path, policy) as app:
            _, created = await app.api("POST", "/api/v1/approvals", json=approval_body(
                action={"name": "t", "params": params}, preview=None, risk="low"))
        return created

    @settings(FUZZ_SETTINGS, max_examples=max(EXAMPLES // 5, 10))
    @given(case=matched(), data=st.data())
    def check(call: Any, case: Any, data: st.DataObject) -> None:
        value = data.draw(retyped(case.value))
        path, params, _ = data.draw(placed(value))
        created = call(check_one(case.spec, path, params))
        seen[created["status"]] = seen.get(created["status"], 0) + 1
        assert created["status"] == "rejected" and created["decision"]["rule"] == "deny-it", (case.spec, path, params,
                                                                                          created.get("policy"))

    with ErrorLog() as errors:
        await in_thread(loop, lambda call: check(call))
        assert errors.take() == []
    assert seen.get("rejected", 0) > 0
