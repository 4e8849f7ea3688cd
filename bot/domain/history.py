"""Suggestions from what people decided: ask less where people always say yes, deny where they say no.

From the decision record of the last `days`: "send_email to *@example.com: approved 23 times by 4
people in 14 days, never rejected, edited once: allow it?" and the reverse ("db_exec on prod-*:
rejected 6 of 7: deny?"). Each suggestion carries the exact policy rule it would add (printed by
`signoff policy suggest` as a policy-file snippet).

What counts: only people's decisions (a button, a form, a thread answer), never policy's, a
grant's or the clock's; a batch counts each of its actions. Requests are grouped by tool and, where a
parameter holds an email address, by the address's domain (`*@example.com`), so a suggestion is no
wider than what people actually saw. Never suggested to allow: anything at the critical tier (a person
always decides those), and a group where any request was critical. A deny only makes things stricter,
so it is suggested at every tier.

In Slack (App Home, the weekly digest) a suggestion is accepted in one tap as the grant
`suggested_grant` builds: the rule's match (other parameters: any, as the rule), scoped to the one
channel its evidence came from (else everyone), for `grant_days`; a deny's grant has `effect` deny
(policy denies what it matches: bot.domain.grants). Its id starts with `grant_prefix`, which is
deterministic in what it would do and where, so a second tap (or a racing one) finds the first.

Pure: bot.approvals.history reads the record and hands it here.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.domain.grants import ALLOW, DENY, FieldMatch, Grant, Scope
from bot.domain.model import Outcome, Via
from bot.domain.values import Risk

__all__ = ["Decided", "HistorySuggestion", "Thresholds", "grant_prefix", "suggest", "suggested_grant"]

PEOPLE = frozenset({Via.BUTTON, Via.MODAL, Via.THREAD, Via.REPLY})
EMAIL = re.compile(r"^[^@\s]+@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)$")


@dataclass(frozen=True)
class Decided:
    """One action a person decided (a batch gives one per action)."""

    tool: str
    params: Mapping[str, Any]
    outcome: Outcome
    via: Via
    decided_by: str | None
    decided_at: datetime
    risk: Risk
    edited: bool = False
    channel: str | None = None


@dataclass(frozen=True)
class Thresholds:
    """When history is enough to suggest (settings: SIGNOFF_SUGGEST_*)."""

    days: int = 14
    min_approvals: int = 20  # allow: approved at least this often ...
    min_people: int = 3  # ... by at least this many different people ...
    max_edits: int = 1  # ... edited at most this often, and never rejected
    min_rejections: int = 5  # deny: rejected at least this often ...
    min_reject_share: float = 0.8  # ... and at least this share of its decisions


@dataclass(frozen=True)
class HistorySuggestion:
    effect: str  # "allow" | "deny"
    tool: str
    params: dict[str, dict[str, str]] = field(default_factory=dict)  # the rule's `params:` (field -> glob)
    approved: int = 0
    rejected: int = 0
    edited: int = 0
    people: int = 0
    days: int = 0
    channels: tuple[str, ...] = ()  # where its evidence was decided
    deciders: tuple[str, ...] = ()  # who decided it (Slack user ids)
    sample: Mapping[str, Any] = field(default_factory=dict, compare=False)  # the latest call's parameters

    @property
    def key(self) -> str:
        """What identifies it across reads (a button's value): the effect, the tool, the rule's params and
        where the grant would hold (a channel, or * for everyone), so a tap never makes a wider grant than shown."""
        return json.dumps([self.effect, self.tool, {k: v["glob"] for k, v in sorted(self.params.items())},
                           self.grant_scope[1] or "*"], separators=(",", ":"), ensure_ascii=False)

    @property
    def key_hash(self) -> str:
        return hashlib.sha256(self.key.encode()).hexdigest()

    @property
    def grant_scope(self) -> tuple[Scope, str | None]:
        """The grant's scope: the one channel the evidence came from, or everyone when it came from several."""
        return (Scope.CHANNEL, self.channels[0]) if len(self.channels) == 1 else (Scope.EVERYONE, None)

    @property
    def scope(self) -> str:
        where = ", ".join(f"{name} {m['glob']}" for name, m in self.params.items())
        return self.tool + (f" {where}" if where else "")  # "send_email to *@example.com"

    @property
    def name(self) -> str:
        words = [self.effect, self.tool, *(m["glob"] for m in self.params.values())]
        return re.sub(r"[^a-z0-9]+", "-", "-".join(words).lower()).strip("-")[:60]

    def text(self) -> str:
        """What a person reads: the evidence, then the question."""
        if self.effect == "allow":
            edits = {0: "never edited", 1: "edited once"}.get(self.edited, f"edited {self.edited} times")
            return (f"{self.scope}: approved {self.approved} times by {self.people} people in {self.days} days, "
                    f"never rejected, {edits}: allow it?")
        total = self.approved + self.rejected
        return f"{self.scope}: rejected {self.rejected} of {total} in {self.days} days: deny it?"

    def rule(self) -> dict[str, Any]:
        """The policy rule it would add (a mapping in the policy file's `rules:` form)."""
        rule: dict[str, Any] = {"name": self.name, "tool": self.tool}
        if self.params:
            rule["params"] = {k: dict(v) for k, v in self.params.items()}
        rule["effect"] = self.effect
        if self.effect == "deny":
            rule["reason"] = f"people rejected {self.rejected} of {self.approved + self.rejected} such requests"
        return rule


def suggest(decided: Iterable[Decided], now: datetime, thresholds: Thresholds = Thresholds()) -> list[HistorySuggestion]:
    """The suggestions the record of the last `thresholds.days` supports, strongest evidence first."""
    since = now - timedelta(days=thresholds.days)
    groups: dict[tuple[str, tuple[tuple[str, str], ...]], list[Decided]] = {}
    for d in decided:
        if d.via not in PEOPLE or d.decided_at < since or d.decided_at > now:
            continue
        if d.outcome not in (Outcome.APPROVED, Outcome.REJECTED):
            continue
        groups.setdefault((d.tool, _shape(d.params)), []).append(d)
    found = []
    for (tool, shape), rows in groups.items():
        critical = any(r.risk is Risk.CRITICAL for r in rows)
        approved = [r for r in rows if r.outcome is Outcome.APPROVED]
        rejected = len(rows) - len(approved)
        edited = sum(r.edited for r in approved)
        deciders = tuple(sorted({r.decided_by for r in rows if r.decided_by}))
        people = len(deciders)
        params = {name: {"glob": glob} for name, glob in shape}
        effect = None
        if (not critical and rejected == 0 and len(approved) >= thresholds.min_approvals and people >= thresholds.min_people
                and edited <= thresholds.max_edits):
            effect = "allow"
        elif rejected >= thresholds.min_rejections and rejected >= thresholds.min_reject_share * len(rows):
            effect = "deny"
        if effect is not None:
            latest = max(rows, key=lambda r: r.decided_at)
            channels = tuple(sorted({r.channel for r in rows if r.channel}))
            found.append(HistorySuggestion(effect, tool, params, approved=len(approved), rejected=rejected,
                                           edited=edited, people=people, days=thresholds.days, channels=channels,
                                           deciders=deciders, sample=dict(latest.params)))
    return sorted(found, key=lambda s: (-(s.approved + s.rejected), s.tool, s.name))


def _shape(params: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The parameters that narrow a group: each top-level email address, as `*@its-domain`."""
    shape = []
    for name, value in sorted(params.items()):
        if isinstance(value, str):
            found = EMAIL.match(value.strip())
            if found:
                shape.append((name, f"*@{found.group(1).lower()}"))
    return tuple(shape)


def grant_prefix(suggestion: HistorySuggestion) -> str:
    """The id prefix of every grant accepting `suggestion` makes: deterministic in what it does and
    where (effect, tool, match, scope), so the grants a suggestion already made are found by it (<= 40 chars
    with the generation number after it)."""
    scope, value = suggestion.grant_scope
    digest = hashlib.sha256(f"{suggestion.key}|{scope.value}|{value or ''}".encode()).hexdigest()
    return f"grt_hs{digest[:24]}_"


def suggested_grant(suggestion: HistorySuggestion, *, grant_id: str, by: str, now: datetime,
                    days: int | None) -> Grant:
    """The grant accepting a suggestion makes: exactly its rule (the named parameters' globs, other
    parameters any) with its effect (allow, or deny), in `grant_scope`, expiring after `days` (None:
    until revoked)."""
    if suggestion.effect not in (ALLOW, DENY):
        raise ValueError(f"unknown effect {suggestion.effect!r}")
    scope, value = suggestion.grant_scope
    return Grant(id=grant_id, tool=suggestion.tool,
                 match={name: FieldMatch("glob", m["glob"]) for name, m in suggestion.params.items()},
                 scope=scope, scope_value=value, created_by=by, created_at=now,
                 expires_at=now + timedelta(days=days) if days else None, any_other_params=True,
                 effect=suggestion.effect)
