"""Property (issue 33): for generated policies and generated agent bodies, the stored request's bar is
never lower than what policy alone gives, and the agent's approvers never replace configured ones.

Checked two ways: through the real HTTP API of a running app (the policy file rewritten and reloaded
per example, as SIGHUP does; a modest number of examples), and over `evaluate` + `apply_evaluation`
directly (many examples). "Policy alone" is `evaluate` of the same call with nothing the agent said.
"""

from __future__ import annotations

import pytest

import asyncio
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.domain.durations import parse_duration
from bot.domain.model import Action, Outcome, Risk
from bot.domain.policy import TIER_ORDER, Call, Effect, Policy, evaluate
from bot.domain.timing import DEFAULT, TIMEOUT_OUTCOMES, Timing, combine
from bot.errors import InvalidInput
from bot.approvals.gate import apply_evaluation, call_of
from bot.policy.file import parse_policy
from bot.sandbox import SlackEmulator
from bot.approvals.service import ApprovalSpec
from tests.support.fuzz import in_thread
from tests.support.app import approval_body, policy_app

pytestmark = pytest.mark.property

HTTP_EXAMPLES = int(os.environ.get("SIGNOFF_BAR_HTTP_EXAMPLES", "40"))
PURE_EXAMPLES = int(os.environ.get("SIGNOFF_BAR_PURE_EXAMPLES", "2000"))
TOOLS = ("t1", "t2", "t3")
PEOPLE = ("U1", "U2", "U3", "U4", "U5")
AGENT_PICKS = ("U1", "U7", "U8", "U9")
RISKS = [r.value for r in Risk]
NOW = datetime(2026, 1, 1, tzinfo=UTC)
SERVER = Timing(remind_every=timedelta(hours=1), remind_max=3, timeout=timedelta(hours=24))  # the settings' defaults


@st.composite
def tier_yaml(draw: st.DrawFn, name: str) -> str | None:
    if not draw(st.booleans()):
        return None
    approvers = draw(st.lists(st.sampled_from(PEOPLE), unique=True, max_size=4))
    parts = [f"approvers: [{', '.join(approvers)}]"]
    parts.append(f"quorum: {draw(st.integers(1, max(1, len(approvers))))}")
    may = draw(st.sampled_from([None, True, False]))
    if may is not None:
        parts.append(f"requester_may_approve: {str(may).lower()}")
    outcomes = ["expire", "reject", *(["approve"] if name == "low" else [])]
    timeout = draw(st.sampled_from(["none", "off", "some"]))
    if timeout == "off":
        parts.append("timeout: false")
    elif timeout == "some":
        parts.append(f"timeout: {{after: {draw(st.integers(2, 30))}h, outcome: {draw(st.sampled_from(outcomes))}}}")
    return f"  {name}: {{{', '.join(parts)}}}"


@st.composite
def policies(draw: st.DrawFn) -> str:
    lines = [f"default_tier: {draw(st.sampled_from(RISKS))}", "tiers:"]
    tiers = [t for t in (draw(tier_yaml(name)) for name in RISKS) if t is not None]
    lines += tiers or ["  high: {}"]
    lines.append("rules:")
    for index in range(draw(st.integers(0, 4))):
        effect = draw(st.sampled_from([None, "ask", "allow"]))
        tier = draw(st.sampled_from([None, *RISKS[:3]] if effect == "allow" else [None, *RISKS]))
        if effect is None and tier is None:
            tier = "medium"
        lines.append(f"  - {{name: r{index}, tool: {draw(st.sampled_from(TOOLS))}"
                     + (f", effect: {effect}" if effect else "") + (f", tier: {tier}" if tier else "") + "}")
    if lines[-1] == "rules:":
        lines[-1] = "rules: []"
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Asked:
    """What an agent put in its body about the bar."""

    tool: str
    risk: str | None
    approvers: tuple[str, ...]
    quorum: int
    decisions: tuple[str, ...] | None
    timeout: Any  # None: not given; False: off; (hours, outcome)

    def body(self) -> dict[str, Any]:
        made = approval_body(action={"name": self.tool, "params": {}}, preview=None, approvers=list(self.approvers),
                             quorum=self.quorum, requested_by="agent")
        made.pop("risk")
        if self.risk is not None:
            made["risk"] = self.risk
        if self.decisions is not None:
            made["allowed_decisions"] = list(self.decisions)
        if self.timeout is not None:
            made["timeout"] = False if self.timeout is False else {"after": f"{self.timeout[0]}h",
                                                                   "outcome": self.timeout[1]}
        return made


asks = st.builds(
    Asked, tool=st.sampled_from(TOOLS), risk=st.sampled_from([None, *RISKS]),
    approvers=st.lists(st.sampled_from(AGENT_PICKS), unique=True, max_size=3).map(tuple),
    quorum=st.integers(1, 3),
    decisions=st.one_of(st.none(), st.lists(st.sampled_from(["approve", "edit", "reject", "respond"]), unique=True,
                                            min_size=1).map(tuple)),
    timeout=st.one_of(st.none(), st.just(False),
                      st.tuples(st.integers(2, 40), st.sampled_from(["expire", "reject", "approve"]))),
)


def configured(policy: Policy) -> set[str]:
    return {a for risk in Risk for a in policy.tier(risk).approvers}


def check_bar(policy: Policy, asked: Asked, stored: dict[str, Any]) -> None:
    """The stored request (API JSON) against what policy alone gives for the same call."""
    alone = evaluate(policy, Call(asked.tool, {}), None, NOW)
    outcome = stored["policy"]["outcome"]
    assert TIER_ORDER[Risk(stored["risk"])] >= TIER_ORDER[alone.tier], (stored["risk"], alone)
    if asked.risk is not None:
        assert TIER_ORDER[Risk(stored["risk"])] >= TIER_ORDER[Risk(asked.risk)]
    if alone.outcome is not Effect.ALLOW:
        assert outcome == alone.outcome.value  # an ask or a deny stays one, whatever the body says
    if outcome != "ask":
        return
    approvers = set(stored["approvers"])
    if alone.approvers:
        assert approvers and approvers <= configured(policy), (stored["approvers"], alone.approvers)
    if approvers - configured(policy):
        assert not configured(policy) & approvers or not alone.approvers
        assert set(stored["approvers"]) <= set(asked.approvers)  # nobody configured any: the agent's own
    if set(stored["approvers"]) == set(alone.approvers):
        assert stored["quorum"] >= alone.quorum
    assert stored["quorum"] >= asked.quorum
    if not alone.requester_may_approve:
        assert stored["requester_may_approve"] is False
    timeout = stored["timing"]["timeout"]
    if timeout is not None and timeout["outcome"] == "approve":
        tier = policy.tier(Risk(stored["risk"])).timeout
        assert isinstance(tier, tuple) and tier[1] is Outcome.APPROVED  # only policy makes silence approve
    tier_timeout = policy.tier(Risk(stored["risk"])).timeout
    if isinstance(tier_timeout, tuple) and tier_timeout[1] is not Outcome.APPROVED:
        assert timeout is not None and timeout["outcome"] != "approve"
        assert parse_duration(timeout["after"]) <= tier_timeout[0]
    if asked.decisions is not None and "allowed_decisions" in stored:
        assert "reject" in stored["allowed_decisions"]  # a person can always say no


async def test_the_bar_over_http(db_url: str, slack: SlackEmulator, tmp_path: Path) -> None:
    async with policy_app(db_url, slack, tmp_path, "rules: []\n") as app:
        assert app.signoff is not None and app.signoff.policy is not None
        holder = app.signoff.policy
        loop = asyncio.get_running_loop()
        seen: dict[int, int] = {}

        @settings(max_examples=HTTP_EXAMPLES, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(text=policies(), asked=asks)
        def check(call: Any, text: str, asked: Asked) -> None:
            (tmp_path / "policy.yaml").write_text(text)
            policy = parse_policy(text)
            holder.reload()  # what SIGHUP does
            assert holder.policy is not None and holder.policy.sha256 == policy.sha256
            status, stored = call(app.api("POST", "/api/v1/approvals", json=asked.body()))
            seen[status] = seen.get(status, 0) + 1
            if status == 400:
                fields = {d["field"] for d in stored["error"]["details"]}
                assert fields <= {"timeout.outcome", "quorum", "timeout.after"}, stored
                if asked.timeout and asked.timeout[1] == "approve":
                    assert "only policy can make silence approve" in stored["error"]["message"]
                return
            assert status == 201, stored
            assert not (asked.timeout and asked.timeout[1] == "approve")  # always a 400
            _, again = call(app.api("GET", f"/api/v1/approvals/{stored['id']}"))
            check_bar(policy, asked, again)

        await in_thread(loop, lambda call: check(call))
    print(f"\nbar over HTTP: answers by status {dict(sorted(seen.items()))}")
    assert seen.get(201, 0) > 0 and seen.get(400, 0) > 0


@settings(max_examples=PURE_EXAMPLES, deadline=None, database=None, derandomize=True)
@given(text=policies(), asked=asks)
def test_the_bar_over_evaluate_and_apply_evaluation(text: str, asked: Asked) -> None:
    policy = parse_policy(text)
    risk = Risk(asked.risk) if asked.risk else None
    timeout: Any = DEFAULT
    if asked.timeout is not None:
        timeout = None if asked.timeout is False else (timedelta(hours=asked.timeout[0]),
                                                       TIMEOUT_OUTCOMES[asked.timeout[1]])
    spec = ApprovalSpec(action=Action(asked.tool, {}), summary="s", risk=risk or Risk.HIGH, channel="C1",
                        approvers=asked.approvers, quorum=asked.quorum, asked_risk=risk,
                        timing=combine(SERVER, risk=Risk.LOW, timeout=timeout),
                        timing_given=frozenset({"timeout"}) if asked.timeout is not None else frozenset())
    evaluation = evaluate(policy, call_of(spec), None, NOW)
    try:
        applied = apply_evaluation(spec, evaluation)
    except InvalidInput as exc:
        assert exc.details and exc.details[0]["field"] == "quorum"
        return
    assert applied.timing is not None
    stored = {
        "risk": applied.risk.value, "policy": evaluation.to_json(), "approvers": list(applied.approvers),
        "quorum": applied.quorum, "requester_may_approve": applied.requester_may_approve,
        "timing": applied.timing.to_json(),
    }
    check_bar(policy, asked, stored)
