"""Policy: whether a call asks at all, and if it asks, whom and how. Pure; no I/O, no clock.

A `Policy` is ordered `Rule`s plus per-tier settings. `evaluate(policy, call, grants, now)` is
the one decision procedure, in this order (as in Claude Code's permission chain):

1. deny rules: any matching deny rule denies. Nothing overrides it: no grant, allow rule,
   API `risk`, MCP `destructiveHint` or tier.
   Then a person's deny grant (`GrantIndex.find_deny`: "rejected 6 of 7: deny?" accepted in Slack):
   at every tier, since it only makes a call stricter; only the file's deny rules come before it.
2. ask rules: the first matching ask rule asks (at tier high, or the rule's own tier).
3. remembered grants, then allow rules: an active, in-scope grant that matches allows
   (`via: grant`), never when the call's tier is `critical`; else the first matching allow
   rule allows (`via: policy`), at any tier policy gives (the file is the authority; an allowed
   call above `low` is announced in the channel afterwards), but not a call the agent itself
   says is critical.
4. the tier's default: low allows silently, medium allows with an FYI, high asks, critical
   asks with typed confirmation.

The call's tier is the tier of the first matching rule that names one; without one, the
operator's declared risk (the runner's tool risk) or the file's `default_tier`, raised to at
least `high` when the tool says it is destructive. The agent's own `risk` (API body, MCP
argument: `Call.asked_risk`) only ever raises that tier, never lowers it; when it raises it, the
tier's settings are the stricter of both tiers' (`_bar`). Inputs only ever feed the tier: they
never skip step 1.

`requester:` globs match who the agent is (`Call.agent`: its API token's name, or the agent of
Signoff's own run) and the Slack user Signoff itself knows started the run (`requester_user`),
never a label the agent wrote (`requested_by`).

Parameters are judged MATCH, NO or UNKNOWN (`bot.domain.matching`: a value a condition cannot judge,
such as a list where one value is expected, "5,000" under `gt`, a path with two readings, another
spelling of a key). Deny and ask rules count UNKNOWN as a match (fail closed; the reason says so),
allow rules never do, and a rule naming a tier that is UNKNOWN before the first matching one
raises the call's tier to its own, never lowers it. Grants (`bot.domain.grants`) match exact JSON
values of exactly the call's parameter names, so nothing they cannot judge matches them.

Evaluation cost: rules are grouped by the tool names they can match once per tool name
(cached), grants are indexed by tool (`GrantIndex`), so a call looks only at what could match.
"""

from __future__ import annotations

import enum
import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.domain.grants import GrantIndex, Subject
from bot.domain.param_paths import ParamPath, Params
from bot.domain.readings import MATCH, NO, UNKNOWN, Verdict
from bot.domain.matching import ValueMatch as ValueMatch  # where it used to live
from bot.domain.model import Outcome, Risk
from bot.domain.timing import DEFAULT

TIER_ORDER = {Risk.LOW: 0, Risk.MEDIUM: 1, Risk.HIGH: 2, Risk.CRITICAL: 3}
_CACHE_MAX = 4096
_MISSING = object()


class Effect(enum.StrEnum):
    DENY = "deny"
    ASK = "ask"
    ALLOW = "allow"


def at_least(tier: Risk, floor: Risk) -> Risk:
    return tier if TIER_ORDER[tier] >= TIER_ORDER[floor] else floor


def glob_regex(pattern: str, *, ignore_case: bool) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern), re.IGNORECASE if ignore_case else 0)


def lookup(params: Mapping[str, Any], path: str) -> Any:
    """`params[path]`, following dots into nested objects when there is no such top-level key."""
    if path in params:
        return params[path]
    value: Any = params
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


@dataclass(frozen=True)
class Rule:
    """Matches when every condition holds: the tool name against any of `tools` (globs, case-
    sensitive), each named parameter, the requester and the channel (globs; empty: any)."""

    name: str
    tools: tuple[str, ...] = ("*",)
    params: tuple[tuple[str, ValueMatch], ...] = ()
    requesters: tuple[str, ...] = ()
    channels: tuple[str, ...] = ()
    effect: Effect | None = None
    tier: Risk | None = None
    reason: str | None = None
    line: int | None = None  # where it is in the policy file, for explanations
    _requesters: Any = field(default=None, init=False, repr=False, compare=False)
    _channels: Any = field(default=None, init=False, repr=False, compare=False)
    _paths: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_requesters", tuple(glob_regex(p, ignore_case=False) for p in self.requesters))
        object.__setattr__(self, "_channels", tuple(glob_regex(p, ignore_case=False) for p in self.channels))
        object.__setattr__(self, "_paths", tuple((ParamPath.of(path), c) for path, c in self.params))

    @property
    def fails_closed(self) -> bool:
        """Whether a parameter this rule cannot judge counts as matching it (deny and ask rules)."""
        return self.effect is Effect.DENY or self.effect is Effect.ASK

    def matches(self, call: Call, *, unknown: bool | None = None, view: Params | None = None) -> bool:
        """Everything but the tool name (the policy has already picked rules by tool). `unknown`: whether
        a parameter the rule cannot judge counts as a match (default: `fails_closed`); `view`: the call's
        parameters as `_first` prepared them once for all rules."""
        if self._channels and not (call.channel and any(p.match(call.channel) for p in self._channels)):
            return False
        if self._requesters:
            # Identity only: the token's name and the Slack user Signoff knows, never `requested_by`.
            who = [w for w in (call.agent, call.requester_user) if w]
            if not any(p.match(w) for p in self._requesters for w in who):
                return False
        verdict = self.judge_params(view or Params(call.params))
        return verdict is MATCH or (verdict is UNKNOWN and (self.fails_closed if unknown is None else unknown))

    def judge_params(self, view: Params) -> Verdict:
        """All parameter conditions together: NO if one is NO, MATCH if all are MATCH, else UNKNOWN."""
        if len(self._paths) == 1:
            return view.judge(*self._paths[0])
        verdict = MATCH
        for path, condition in self._paths:
            verdict = min(verdict, view.judge(path, condition))
            if verdict is NO:
                return NO
        return verdict

    def unknown_note(self, call: Call) -> str | None:
        """Why this rule's parameters could not be judged on `call` (None: they could)."""
        view = Params(call.params)
        for path, condition in self._paths:
            note = view.explain(path, condition)
            if note is not None:
                return note
        return None

    @property
    def where(self) -> str:
        return f"rule {self.name!r}" + (f" (line {self.line})" if self.line else "")


@dataclass(frozen=True)
class TierSettings:
    """What asking (or allowing) at one tier means. Timing parts follow `bot.domain.timing.combine`:
    DEFAULT (not set: the server's default), None (off), or the value."""

    approvers: tuple[str, ...] = ()
    quorum: int = 1
    requester_may_approve: bool = True
    confirm: str | None = None  # typed-confirmation template: "{params.resource}", "{action}", "DELETE"
    reminders: Any = DEFAULT  # (every: timedelta, max: int) | None | DEFAULT
    escalation: Any = DEFAULT  # (levels: tuple[Level, ...], loops: int) | None | DEFAULT
    timeout: Any = DEFAULT  # (after: timedelta, outcome: Outcome) | None | DEFAULT
    undo: timedelta | None = None  # after a person's Approve, how long they may take it back (bot.domain.undo)
    note: bool = False  # an AI note on the card (bot/domain/assist.py): Claude explains, never decides


DEFAULT_TIERS: Mapping[Risk, TierSettings] = {
    Risk.LOW: TierSettings(),
    Risk.MEDIUM: TierSettings(),
    Risk.HIGH: TierSettings(),
    Risk.CRITICAL: TierSettings(requester_may_approve=False, confirm="{action}"),
}


@dataclass(frozen=True)
class Call:
    """What is being asked, as policy sees it."""

    tool: str
    params: Mapping[str, Any]
    risk: Risk | None = None  # the operator's declared risk (the runner's tool risk): trusted
    destructive: bool | None = None  # a tool's destructive hint
    requester: str | None = None  # requested_by (free text: an agent's name, or a Slack user id)
    # The Slack user Signoff itself knows asked (who started Signoff's run); never a body field.
    requester_user: str | None = None
    channel: str | None = None
    agent: str | None = None  # who the agent is: `bot.domain.grants.agent_of` (its token), never a label
    run_id: str | None = None
    asked_risk: Risk | None = None  # the agent's own risk (API body, MCP argument): only ever raises the tier

    @property
    def subject(self) -> Subject:
        return Subject(run_id=self.run_id, agent=self.agent, channel=self.channel)  # never the requester label


@dataclass(frozen=True)
class Candidates:
    """One tool's rules, each list in file order: a rule is in every list its effect and tier put it in."""

    deny: tuple[Rule, ...]
    ask: tuple[Rule, ...]
    allow: tuple[Rule, ...]
    tier: tuple[Rule, ...]


def _first(rules: tuple[Rule, ...], call: Call) -> Rule | None:
    view = Params(call.params)
    for rule in rules:
        if rule.matches(call, view=view):
            return rule
    return None


def _raised_by_unknown(rules: tuple[Rule, ...], call: Call, tier: Risk, named: Rule | None) -> Risk:
    """`tier`, raised to the tier of any rule before `named` (the first that matches) whose parameters
    could not be judged: such a rule might have been the one (it never lowers the tier)."""
    view: Params | None = None
    for rule in rules:
        if rule is named:
            break
        if rule.tier is not None and TIER_ORDER[rule.tier] > TIER_ORDER[tier]:
            view = view or Params(call.params)
            if rule.matches(call, unknown=True, view=view):  # it did not match: so it is UNKNOWN
                tier = rule.tier
    return tier


def _unknown_clause(rule: Rule, call: Call) -> str:
    note = rule.unknown_note(call)
    return f": {note}, so the rule counts as matching" if note else ""


@dataclass(frozen=True)
class Policy:
    rules: tuple[Rule, ...] = ()
    tiers: Mapping[Risk, TierSettings] = field(default_factory=lambda: dict(DEFAULT_TIERS))
    default_tier: Risk = Risk.HIGH  # a call that names no risk
    source: str = "<policy>"
    sha256: str = ""
    grant_admins: tuple[str, ...] = ()  # Slack user / user group ids who may see and revoke every grant
    _exact: Any = field(default=None, init=False, repr=False, compare=False)
    _wild: Any = field(default=None, init=False, repr=False, compare=False)
    _cache: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        exact: dict[str, list[int]] = {}
        wild: list[tuple[int, re.Pattern[str]]] = []
        for index, rule in enumerate(self.rules):
            for pattern in dict.fromkeys(rule.tools):
                if any(c in pattern for c in "*?["):
                    wild.append((index, glob_regex(pattern, ignore_case=False)))
                else:
                    exact.setdefault(pattern, []).append(index)
        object.__setattr__(self, "_exact", exact)
        object.__setattr__(self, "_wild", wild)
        object.__setattr__(self, "_cache", {})

    def candidates(self, tool: str) -> Candidates:
        """The rules whose tool patterns match `tool`, in file order and by role (cached per tool name)."""
        found: Candidates | None = self._cache.get(tool)
        if found is None:
            indexes = set(self._exact.get(tool, ()))
            indexes.update(i for i, pattern in self._wild if pattern.match(tool))
            rules = [self.rules[i] for i in sorted(indexes)]
            found = Candidates(
                deny=tuple(r for r in rules if r.effect is Effect.DENY),
                ask=tuple(r for r in rules if r.effect is Effect.ASK),
                allow=tuple(r for r in rules if r.effect is Effect.ALLOW),
                tier=tuple(r for r in rules if r.tier is not None and r.effect is not Effect.DENY),
            )
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[tool] = found
        return found

    def tier(self, risk: Risk) -> TierSettings:
        return self.tiers.get(risk) or DEFAULT_TIERS[risk]


@dataclass(frozen=True)
class Evaluation:
    """The outcome, why, and (for asks) the tier's approvers, quorum, confirmation and timing."""

    outcome: Effect
    tier: Risk
    reason: str
    rule: str | None = None
    grant_id: str | None = None
    fyi: bool = False  # allowed, and the channel hears about it afterwards
    approvers: tuple[str, ...] = ()
    quorum: int = 1
    requester_may_approve: bool = True
    confirm: str | None = None  # rendered typed-confirmation text (critical)
    reminders: Any = DEFAULT
    escalation: Any = DEFAULT
    timeout: Any = DEFAULT
    undo: timedelta | None = None
    note: bool = False  # the tier asks for an AI note on the card
    policy_tier: Risk | None = None  # the tier policy alone gave, when the agent's risk raised it

    @property
    def via(self) -> str | None:
        if self.outcome is Effect.ASK:
            return None
        return "grant" if self.grant_id else "policy"

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value, "tier": self.tier.value, "rule": self.rule, "grant_id": self.grant_id,
            "reason": self.reason, "fyi": self.fyi, "via": self.via,
        }


def render_confirm(template: str | None, call: Call) -> str | None:
    """The text a person must type: `{action}` and `{params.NAME}` filled in from the call."""
    if template is None:
        return None

    def fill(found: re.Match[str]) -> str:
        key = found.group(1)
        if key == "action":
            return call.tool
        value = lookup(call.params, key.removeprefix("params."))
        return call.tool if value is _MISSING else str(value)

    return re.sub(r"\{(action|params\.[^{}]+)\}", fill, template)


def evaluate(policy: Policy, call: Call, grants: GrantIndex | None, now: datetime) -> Evaluation:
    """Decide `call` under `policy` and the remembered `grants` (see the module docstring)."""
    rules = policy.candidates(call.tool)
    deny = _first(rules.deny, call)
    named = _first(rules.tier, call)
    tier = named.tier if named is not None else None
    if tier is None:
        tier = call.risk or policy.default_tier
        if call.destructive:
            tier = at_least(tier, Risk.HIGH)
    tier = _raised_by_unknown(rules.tier, call, tier, named)

    def result(outcome: Effect, base: Risk, reason: str, **kw: Any) -> Evaluation:
        # `base`: what policy alone says; the agent's risk may only raise it.
        raised = at_least(base, call.asked_risk) if call.asked_risk is not None else base
        return _result(policy, call, outcome, raised, reason, base=base, **kw)

    if deny is not None:
        note = _unknown_clause(deny, call)
        why = f"denied by {deny.where}" + note + (("; " if note else ": ") + deny.reason if deny.reason else "")
        return result(Effect.DENY, deny.tier or tier, why, rule=deny.name)
    denied = grants.find_deny(call.tool, call.params, call.subject, now) if grants is not None else None
    if denied is not None:
        return result(Effect.DENY, tier, f"denied by grant {denied.id} (a person's deny, made by {denied.created_by})",
                      grant_id=denied.id)
    ask = _first(rules.ask, call)
    if ask is not None:
        return result(Effect.ASK, at_least(ask.tier or tier, Risk.HIGH), f"asked by {ask.where}" + _unknown_clause(ask, call),
                      rule=ask.name)
    raised = at_least(tier, call.asked_risk) if call.asked_risk is not None else tier
    if raised is not Risk.CRITICAL and grants is not None:
        grant = grants.find(call.tool, call.params, call.subject, now)
        if grant is not None:
            return result(Effect.ALLOW, tier, f"allowed by grant {grant.id}", grant_id=grant.id)
    # An allow rule allows at any tier policy gives, but not a call the agent itself says is critical:
    # critical calls ask with a typed confirmation (the loader refuses allow rules at critical).
    allow = _first(rules.allow, call) if call.asked_risk is not Risk.CRITICAL else None
    if allow is not None:
        allowed_tier = allow.tier or tier
        # The stored risk is the higher one; whether the channel hears of it is the rule's tier's say.
        return result(Effect.ALLOW, allowed_tier, f"allowed by {allow.where}", rule=allow.name,
                      fyi=allowed_tier is not Risk.LOW)
    if raised is Risk.LOW:
        return result(Effect.ALLOW, tier, "tier low: allowed without a message")
    if raised is Risk.MEDIUM:
        return result(Effect.ALLOW, tier, "tier medium: allowed, with an FYI in the channel", fyi=True)
    return result(Effect.ASK, tier, f"tier {raised.value}: a person decides"
                  + (f" (the agent asked for {raised.value}; policy: {tier.value})" if raised is not tier else ""))


def _bar(policy: Policy, tier: Risk, base: Risk) -> TierSettings:
    """The settings a call at `tier` gets when policy alone put it at `base` (the agent asked for more).

    The raised tier's own settings, never looser than the base tier's: its approvers, or the base's
    when it names none; the larger quorum (at most the people listed); self-approval only if both allow it; its
    confirmation, or the base's; each timing part its own, or the base's when it leaves it to the
    server, except a base timeout that approves (only policy's low tier can): silence never approves
    a request the agent itself asked to be looked at more closely.
    """
    high, low = policy.tier(tier), policy.tier(base)
    if tier is base:
        return high
    timeout = high.timeout
    if timeout is DEFAULT and not (low.timeout not in (None, DEFAULT) and low.timeout[1] is Outcome.APPROVED):
        timeout = low.timeout
    approvers = high.approvers or low.approvers
    quorum = max(high.quorum, low.quorum)
    if approvers and not any(a.startswith("S") for a in approvers):
        quorum = min(quorum, len(approvers))  # never more than the listed people can give
    return TierSettings(
        approvers=approvers,
        quorum=quorum,
        requester_may_approve=high.requester_may_approve and low.requester_may_approve,
        confirm=high.confirm or low.confirm,
        reminders=low.reminders if high.reminders is DEFAULT else high.reminders,
        escalation=low.escalation if high.escalation is DEFAULT else high.escalation,
        timeout=timeout,
        undo=max((w for w in (high.undo, low.undo) if w is not None), default=None),  # the longer window
        note=high.note or low.note,
    )


def _result(policy: Policy, call: Call, outcome: Effect, tier: Risk, reason: str, *, base: Risk,
            rule: str | None = None, grant_id: str | None = None, fyi: bool = False) -> Evaluation:
    settings = _bar(policy, tier, base)
    return Evaluation(
        outcome=outcome, tier=tier, reason=reason, rule=rule, grant_id=grant_id, fyi=fyi,
        approvers=settings.approvers, quorum=settings.quorum, requester_may_approve=settings.requester_may_approve,
        confirm=render_confirm(settings.confirm, call) if outcome is Effect.ASK else None,
        reminders=settings.reminders, escalation=settings.escalation, timeout=settings.timeout,
        undo=settings.undo if outcome is Effect.ASK else None,
        note=settings.note and outcome is Effect.ASK,
        policy_tier=base if base is not tier else None,
    )
