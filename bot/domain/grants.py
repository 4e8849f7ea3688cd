"""Remembered grants and delegations as pure values (no I/O, no clock).

A `Grant` is a person's "approve, and don't ask again for calls like this one": the tool, a
match on its parameters, a scope and an expiry. Invariants:
- A grant never widens beyond its match: the call must name the same tool and carry exactly
  the parameter names the grant lists (an extra or a missing parameter does not match), and
  every value must match that field's matcher (`eq`: equal as JSON; `glob`: case-insensitive
  shell pattern on a string; `command`: one simple shell command a Claude Code Bash rule covers,
  `bot.domain.claude_rules`). The one exception is a grant made from a Claude permission
  suggestion (`any_other_params`): Claude's rule names one parameter (or none, for the whole
  tool), so the others (a Bash call's `description`, `timeout`) may be anything, as in Claude.
- A revoked or expired grant matches nothing, from the instant of revocation or expiry.
- Grants never apply to the `critical` tier (`bot.domain.policy.evaluate` enforces it).
- A deny grant (`effect` DENY: a person accepted "rejected 6 of 7: deny?" from the decision record,
  bot.domain.history) only ever makes a call stricter: it denies matching calls at every tier,
  before ask rules, grants and allow rules (only policy-file deny rules come before it). It matches
  fail-closed like a deny rule: a value its matcher cannot judge (a list where a glob expects text)
  counts as a match.

A `Delegation` is "while I am away, my requests also go to X". It is active from `starts_at`
until `until` (exclusive) unless ended earlier (`ended_at`, by `/signoff back`).
"""

from __future__ import annotations

import enum
import fnmatch
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot.domain.claude_rules import command_matches, command_regex


ALLOW, DENY = "allow", "deny"  # a grant's effect


class Scope(enum.StrEnum):
    RUN = "run"  # this agent run only
    AGENT = "agent"  # this agent: its API token's name, or the agent of Signoff's own run (`agent_of`)
    CHANNEL = "channel"  # requests in this channel
    EVERYONE = "everyone"


@dataclass(frozen=True)
class Subject:
    """Who and where a call comes from, for scopes: one of these must equal the grant's scope value."""

    run_id: str | None = None
    agent: str | None = None
    channel: str | None = None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass(frozen=True)
class FieldMatch:
    """How one parameter must look: `eq` (the exact JSON value), `glob` (a pattern on a string) or
    `command` (a Claude Code Bash rule's content, e.g. `npm test *`: one simple command it covers)."""

    op: str
    value: Any
    _compiled: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.op == "glob":
            if not isinstance(self.value, str):
                raise ValueError("a glob must be a string")
            object.__setattr__(self, "_compiled", re.compile(fnmatch.translate(self.value), re.IGNORECASE))
        elif self.op == "command":
            if not isinstance(self.value, str):
                raise ValueError("a command rule must be a string")
            object.__setattr__(self, "_compiled", command_regex(self.value))
        elif self.op == "eq":
            object.__setattr__(self, "_compiled", _canonical(self.value))
        else:
            raise ValueError(f"unknown match op {self.op!r} (eq, glob, command)")

    def judgeable(self, actual: Any) -> bool:
        """Whether `matches` can say anything about `actual` (a glob or a command judges text only)."""
        return self.op == "eq" or isinstance(actual, str)

    def matches(self, actual: Any) -> bool:
        if self.op == "glob":
            return isinstance(actual, str) and self._compiled.match(actual) is not None
        if self.op == "command":
            return command_matches(self._compiled, actual)
        return bool(_canonical(actual) == self._compiled)

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "value": self.value}

    def describe(self) -> str:
        if self.op == "command":
            return f"is one command like {self.value}"
        return f"matches {self.value}" if self.op == "glob" else f"= {_canonical(self.value)}"


@dataclass(frozen=True)
class Grant:
    id: str
    tool: str
    match: Mapping[str, FieldMatch]
    scope: Scope
    scope_value: str | None
    created_by: str
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    revoked_by: str | None = None
    request_id: str | None = None  # the request whose "Approve & remember" made it
    any_other_params: bool = False  # a Claude suggestion's grant: parameters not in `match` may be anything
    effect: str = ALLOW  # DENY: matching calls are denied (see the module docstring)

    def active(self, now: datetime) -> bool:
        if self.revoked_at is not None and self.revoked_at <= now:
            return False
        return self.expires_at is None or now < self.expires_at

    def in_scope(self, subject: Subject) -> bool:
        if self.scope is Scope.EVERYONE:
            return True
        have = {Scope.RUN: subject.run_id, Scope.AGENT: subject.agent, Scope.CHANNEL: subject.channel}[self.scope]
        return have is not None and have == self.scope_value

    def matches(self, tool: str, params: Mapping[str, Any]) -> bool:
        """Whether this grant allows the call (a deny grant never does: `denies`)."""
        if self.effect == DENY or tool != self.tool or (len(params) != len(self.match) and not self.any_other_params):
            return False
        for name, matcher in self.match.items():
            if name not in params or not matcher.matches(params[name]):
                return False
        return True

    def denies(self, tool: str, params: Mapping[str, Any]) -> bool:
        """A deny grant's match, fail-closed: a named parameter's value the matcher cannot judge matches."""
        if self.effect != DENY or tool != self.tool or (len(params) != len(self.match) and not self.any_other_params):
            return False
        for name, matcher in self.match.items():
            if name not in params:
                return False
            if matcher.judgeable(params[name]) and not matcher.matches(params[name]):
                return False
        return True

    def match_json(self) -> dict[str, Any]:
        return {name: m.to_json() for name, m in self.match.items()}

    def to_json(self) -> dict[str, Any]:
        """A grant not written yet, kept with an approval in its undo window (bot/domain/undo.py)."""
        return {"id": self.id, "tool": self.tool, "match": self.match_json(), "scope": self.scope.value,
                "scope_value": self.scope_value, "created_by": self.created_by, "created_at": self.created_at.isoformat(),
                "expires_at": self.expires_at.isoformat() if self.expires_at else None, "request_id": self.request_id,
                "any_other_params": self.any_other_params, "effect": self.effect}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Grant:
        expires = data.get("expires_at")
        return cls(id=str(data["id"]), tool=str(data["tool"]), match=match_from_json(data["match"]),
                   scope=Scope(data["scope"]), scope_value=data.get("scope_value"), created_by=str(data["created_by"]),
                   created_at=datetime.fromisoformat(str(data["created_at"])),
                   expires_at=datetime.fromisoformat(str(expires)) if expires else None,
                   request_id=data.get("request_id"), any_other_params=bool(data.get("any_other_params")),
                   effect=DENY if data.get("effect") == DENY else ALLOW)

    def describe(self) -> str:
        """One line for people: `send_email` with to matches *@example.com, subject = "Hi" (a deny grant:
        "denies db_exec with any parameters")."""
        parts = [f"{name} {m.describe()}" for name, m in self.match.items()]
        verb = "denies " if self.effect == DENY else ""
        if self.any_other_params:
            return f"{verb}{self.tool}" + (" with " + ", ".join(parts) + " (other parameters: any)" if parts
                                           else " with any parameters")
        return f"{verb}{self.tool}" + (" with " + ", ".join(parts) if parts else " with no parameters")


OWNER_KEY = "api_token"  # where a request made through the API keeps its token's name (bot.api.owners.OWNER)


def agent_of(extra: Mapping[str, Any]) -> str | None:
    """Who the agent behind a request is: the name of the API token that made it, or the agent of
    Signoff's own run. Never a field the agent wrote (`requested_by`, an MCP argument, a hook's host or
    session are display labels). Grants "for this agent", `requester:` rules and separation of duties
    key on this."""
    owner = extra.get(OWNER_KEY)
    if isinstance(owner, str) and owner:
        return owner
    agent = extra.get("agent")
    return agent if isinstance(agent, str) and agent and isinstance(extra.get("run_id"), str) else None


def run_of(extra: Mapping[str, Any]) -> str | None:
    """What scope `run` means for a request: Signoff's own run, or the session an agent named
    (`session` on the API, e.g. a Claude Code session id), kept apart from run ids by a prefix and
    bound to the token that named it (another token naming the same session is another run)."""
    run = extra.get("run_id")
    if isinstance(run, str) and run:
        return run
    session = extra.get("session")
    if not (isinstance(session, str) and session):
        return None
    owner = agent_of(extra)
    return f"session:{owner}:{session}" if owner else f"session:{session}"


def match_from_json(data: Mapping[str, Any]) -> dict[str, FieldMatch]:
    return {str(name): FieldMatch(str(m["op"]), m.get("value")) for name, m in data.items()}


class GrantIndex:
    """Grants by tool, then by parameter names, then by the exact value of one `eq` field.

    A call can only match grants with its tool and exactly its parameter names (no widening), and
    a grant with an `eq` field can only match a call with that value: finding one looks at those
    few grants only, however many there are. When several match, the oldest wins. Deny grants are
    kept apart (`find_deny`, scanned per tool: there are few), so `find` never returns one.
    """

    def __init__(self, grants: Iterable[Grant] = ()) -> None:
        self._by_tool: dict[str, dict[frozenset[str], _Bucket]] = {}
        self._open: dict[str, list[Grant]] = {}  # any_other_params grants (Claude suggestions): scanned per tool
        self._deny: dict[str, list[Grant]] = {}
        self._count = 0
        for grant in grants:
            if grant.effect == DENY:
                self._deny.setdefault(grant.tool, []).append(grant)
                self._count += 1
                continue
            if grant.any_other_params:
                self._open.setdefault(grant.tool, []).append(grant)
                self._count += 1
                continue
            bucket = self._by_tool.setdefault(grant.tool, {}).setdefault(frozenset(grant.match), _Bucket())
            key = next((n for n in sorted(grant.match) if grant.match[n].op == "eq"), None)
            if key is None:
                bucket.scan.append(grant)
            else:
                bucket.keyed.setdefault(key, {}).setdefault(grant.match[key]._compiled, []).append(grant)
            self._count += 1

    def __len__(self) -> int:
        return self._count

    def find_deny(self, tool: str, params: Mapping[str, Any], subject: Subject, now: datetime) -> Grant | None:
        """The oldest active, in-scope deny grant that matches the call (fail-closed), or None."""
        best: Grant | None = None
        for grant in self._deny.get(tool, ()):
            if _better(grant, best) and grant.active(now) and grant.in_scope(subject) and grant.denies(tool, params):
                best = grant
        return best

    def find(self, tool: str, params: Mapping[str, Any], subject: Subject, now: datetime) -> Grant | None:
        """The oldest active, in-scope grant that matches the call, or None."""
        best: Grant | None = None
        for grant in self._open.get(tool, ()):
            if _better(grant, best) and grant.active(now) and grant.in_scope(subject) and grant.matches(tool, params):
                best = grant
        bucket = self._by_tool.get(tool, {}).get(frozenset(params))
        if bucket is None:
            return best
        for name, table in bucket.keyed.items():
            for grant in table.get(_canonical(params[name]), ()):
                if _better(grant, best) and grant.active(now) and grant.in_scope(subject) \
                        and grant.matches(tool, params):
                    best = grant
        for grant in bucket.scan:
            if _better(grant, best) and grant.active(now) and grant.in_scope(subject) and grant.matches(tool, params):
                best = grant
        return best


@dataclass
class _Bucket:
    keyed: dict[str, dict[str, list[Grant]]] = field(default_factory=dict)
    scan: list[Grant] = field(default_factory=list)


def _better(grant: Grant, best: Grant | None) -> bool:
    return best is None or (grant.created_at, grant.id) < (best.created_at, best.id)


# -- generalising a call into a grant's match (the "Approve & remember" modal) --------------------

EXACT, ANY, DOMAIN = "exact", "any", "domain"
_EMAIL = re.compile(r"^[^@\s]+@([^@\s]+\.[^@\s]+)$")


def email_domain(value: Any) -> str | None:
    """The domain of an e-mail address (None if `value` is not one)."""
    if not isinstance(value, str):
        return None
    found = _EMAIL.match(value.strip())
    return found.group(1).lower() if found else None


def generalise(params: Mapping[str, Any], choices: Mapping[str, str]) -> dict[str, FieldMatch]:
    """The match for a grant made from `params`: every field exact unless `choices` says
    `any` (any string) or `domain` (any address at the same domain). Raises ValueError for a
    choice that does not fit the value (no widening a number to "any string")."""
    match: dict[str, FieldMatch] = {}
    for name, value in params.items():
        choice = choices.get(name, EXACT)
        if choice == EXACT:
            match[name] = FieldMatch("eq", value)
        elif choice == ANY and isinstance(value, str):
            match[name] = FieldMatch("glob", "*")
        elif choice == DOMAIN and email_domain(value) is not None:
            match[name] = FieldMatch("glob", f"*@{email_domain(value)}")
        else:
            raise ValueError(f"{name} cannot be generalised as {choice!r}")
    unknown = set(choices) - set(params)
    if unknown:
        raise ValueError(f"no parameter named {sorted(unknown)[0]!r}")
    return match


# -- delegation -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Delegation:
    user: str
    delegate: str
    starts_at: datetime
    until: datetime | None = None
    ended_at: datetime | None = None
    id: int | None = None

    def active(self, now: datetime) -> bool:
        if self.ended_at is not None and self.ended_at <= now:
            return False
        return self.starts_at <= now and (self.until is None or now < self.until)


def delegates_for(
    people: Iterable[str], delegations: Iterable[Delegation], now: datetime
) -> tuple[Delegation, ...]:
    """The active delegations of any of `people` (requests that would go to them also go to
    the delegate). A delegate who is away is not followed further: one hop, no chains."""
    wanted = set(people)
    seen: set[str] = set()
    found = []
    for d in delegations:
        if d.user in wanted and d.active(now) and d.user not in seen and d.delegate != d.user:
            seen.add(d.user)
            found.append(d)
    return tuple(found)
