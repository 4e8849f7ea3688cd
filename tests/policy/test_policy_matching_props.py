"""Properties of policy matching (issue 33, item 4), on the pure functions with many examples:

- a value a deny rule matches stays denied under every re-typing and re-formatting the API accepts
  (list vs scalar, number vs numeric text and its formatted variants, key spelling and nesting,
  Unicode normal forms of keys and text);
- an allow rule never matches a value it cannot judge (the same re-typings), and never a path with
  more than one reading unless every reading matches;
- deny and allow read the same value consistently: whatever an allow rule matches, a deny rule with
  the same condition denies.
"""

from __future__ import annotations

import pytest

from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.domain.matching import MATCH, NO, UNKNOWN, ValueMatch
from bot.domain.model import Risk
from bot.domain.policy import Call, Effect, Policy, Rule, evaluate
from tests.policy.strategies import Case, matched, placed, retyped

NOW = datetime(2026, 12, 1, tzinfo=UTC)
MANY = settings(max_examples=1500, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


def outcome(effect: Effect, path: str, condition: ValueMatch, params: dict[str, Any]) -> Effect:
    policy = Policy(rules=(Rule("r", tools=("t",), params=((path, condition),), effect=effect,
                                tier=Risk.LOW if effect is Effect.ALLOW else None),))
    return evaluate(policy, Call("t", params, risk=Risk.HIGH), None, NOW).outcome


@MANY
@pytest.mark.property
@given(case=matched(), data=st.data())
def test_a_denied_value_stays_denied_however_it_is_retyped_or_placed(case: Case, data: st.DataObject) -> None:
    value = data.draw(st.one_of(st.just(case.value), retyped(case.value)))
    path, params, _ = data.draw(placed(value))
    assert outcome(Effect.DENY, path, case.condition, params) is Effect.DENY, (case.spec, path, params)
    assert outcome(Effect.ASK, path, case.condition, params) is Effect.ASK


@MANY
@pytest.mark.property
@given(case=matched(), data=st.data())
def test_an_allow_never_matches_what_it_cannot_judge(case: Case, data: st.DataObject) -> None:
    value = data.draw(retyped(case.value))
    path, params, exact = data.draw(placed(value))
    verdict = case.condition.judge(value)
    allowed = outcome(Effect.ALLOW, path, case.condition, params) is Effect.ALLOW
    if isinstance(exact, tuple):  # two readings: allowed only if both match
        exact = case.condition.judge(exact[1]) is MATCH
    if verdict is not MATCH or not exact:
        assert not allowed, (case.spec, path, params)
    # And the exact value at an exact path is allowed: the allow is not simply dead.
    plain_path, plain_params, plain_exact = data.draw(placed(case.value))
    if plain_exact is True:
        assert outcome(Effect.ALLOW, plain_path, case.condition, plain_params) is Effect.ALLOW


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                         st.floats(allow_nan=False), st.text(max_size=12),
                         st.sampled_from(["5,000", "5.000", "1e3", "0x10", "\uff15", "inf", "nan", "TRUE", "Prod"]))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)), max_leaves=8)
conditions = st.builds(
    ValueMatch,
    any_of=st.one_of(st.none(), st.lists(json_scalars, min_size=1, max_size=3).map(tuple)),
    glob=st.one_of(st.none(), st.sampled_from(["*", "prod*", "*@example.com", "ｐｒｏｄ*", "[!a]*"])),
    regex=st.one_of(st.none(), st.sampled_from(["^(?!DE)", "(?i)drop", "^[0-9]+$"])),
    gt=st.one_of(st.none(), st.integers(-100, 10**6).map(float)),
    le=st.one_of(st.none(), st.integers(-100, 10**6).map(float)),
)


@MANY
@pytest.mark.property
@given(condition=conditions, value=json_values, key=st.text(min_size=1, max_size=5))
def test_deny_reads_at_least_what_allow_reads(condition: ValueMatch, value: Any, key: str) -> None:
    verdict = condition.judge(value)
    assert verdict in (MATCH, NO, UNKNOWN)
    params = {key: value}
    if outcome(Effect.ALLOW, key, condition, params) is Effect.ALLOW:
        assert outcome(Effect.DENY, key, condition, params) is Effect.DENY
    if isinstance(value, list | dict):
        assert verdict is not MATCH or condition.any_of is not None  # only an equal structure is judged


def test_examples_of_each_reading() -> None:
    gt = ValueMatch(gt=1000.0)
    assert [gt.judge(v) for v in (5000, "5000", " 5000 ", "5,000", "5e3", "1.500", "ten", "nan", True, None)] == [
        MATCH, MATCH, MATCH, UNKNOWN, UNKNOWN, UNKNOWN, NO, NO, NO, NO]
    prod = ValueMatch(any_of=("prod",))
    assert [prod.judge(v) for v in ("prod", "PROD", "ｐｒｏｄ", "pr\u200bod", ["x", "prod"], ["x"], {"prod": 1})] == [
        MATCH, UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, NO, UNKNOWN]
    german = ValueMatch(regex="^(?!DE)")  # a case-sensitive negative pattern is not casefolded
    assert (german.judge("DE12"), german.judge("FR12")) == (NO, MATCH)
    assert ValueMatch(any_of=(True,)).judge(1) is UNKNOWN and ValueMatch(any_of=(True,)).judge(0) is NO
