"""Claude's permission suggestions on a request, and which of them a person may accept in one tap. Pure.

Claude Code (the Agent SDK's `can_use_tool` context, a PermissionRequest hook's input) offers
"permission updates" with a call, e.g. `{"type": "addRules", "rules": [{"toolName": "Bash",
"ruleContent": "npm test *"}], "behavior": "allow", "destination": "localSettings"}`. The agent
sends them with the request (`suggestions`); the card offers the usable ones as "Approve & always
allow ..."; accepting one approves the request and makes one grant per rule.

Invariants:
- A suggestion is OFFERED only if it is `addRules` with behavior `allow`, every rule names the
  request's own tool and maps to a match (`bot.domain.claude_rules`: never wider than Claude's
  rule), and its destination maps to a scope: `session` -> this run (the session the request
  names), `localSettings` / `projectSettings` / `userSettings` -> this agent (its API token's name,
  `bot.domain.grants.agent_of`; never `requested_by`).
  Every other suggestion is shown with the reason it is not offered; none is ever an error.
- Offers exist only where one approval decides: under a policy file (grants apply only there),
  approve offered, not critical, no typed confirmation, quorum 1, not a batch. Otherwise every
  suggestion is shown as not offered, with that reason.
- At most MAX_OFFERS are offered (buttons on a phone); the rest say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.domain.choices import allowed_decisions
from bot.domain.claude_rules import UnmappedRule, command_regex, describe_command, web_domain
from bot.domain.grants import FieldMatch, Scope, agent_of, run_of
from bot.domain.model import Kind, Request, Risk

EXTRA_KEY = "suggestions"  # the request's suggestions, as the agent sent them (request.extra)
ACCEPTED_KEY = "accepted_suggestion"  # {"index", "update", "grant_ids"} once a person accepted one
MAX_SUGGESTIONS = 10
MAX_OFFERS = 3
SETTINGS = {"localSettings": "this project's local settings", "projectSettings": "this project's settings",
            "userSettings": "the user's settings"}


@dataclass(frozen=True)
class RuleGrant:
    """One rule of a suggestion, as the grant it becomes."""

    tool: str
    match: Mapping[str, FieldMatch]
    rule: str  # as Claude writes it: Bash(npm test *)
    meaning: str  # plain words: Bash commands that start with “npm test”


@dataclass(frozen=True)
class Suggestion:
    index: int  # position in the request's list (what the agent gets back)
    raw: Mapping[str, Any]
    label: str  # short: Bash(npm test *); or what a non-rule suggestion would do
    rules: tuple[RuleGrant, ...] = ()
    scope: Scope | None = None
    scope_value: str | None = None
    why_not: str | None = None  # None: offered

    @property
    def offered(self) -> bool:
        return self.why_not is None

    def meaning(self) -> str:
        """The whole offer in plain words: what is allowed, for whom, for how long."""
        what = "; ".join(r.meaning for r in self.rules)
        where = "in this session" if self.scope is Scope.RUN else f"for this agent ({self.scope_value})"
        return f"always allow {what}, {where}, until revoked"


def rule_text(rule: Mapping[str, Any]) -> str:
    tool = str(rule.get("toolName") or "?")
    content = rule.get("ruleContent")
    return f"{tool}({content})" if isinstance(content, str) and content else tool


def rule_grant(tool: str, rule: Mapping[str, Any]) -> RuleGrant:
    """The grant one rule makes for calls of `tool`. Raises UnmappedRule saying why not."""
    name, content = rule.get("toolName"), rule.get("ruleContent")
    text = rule_text(rule)
    if name != tool:
        raise UnmappedRule(f"it is about {str(name)[:80]}, not this call's tool {tool}")
    if content is None or content == "":
        return RuleGrant(tool, {}, text, f"every {tool} call")
    if not isinstance(content, str):
        raise UnmappedRule("its rule content is not text")
    if tool == "Bash":
        command_regex(content)  # raises when it cannot be mapped safely
        return RuleGrant(tool, {"command": FieldMatch("command", content)}, text, describe_command(content))
    if tool == "WebFetch":
        host = web_domain(content)
        return RuleGrant(tool, {"url": FieldMatch("glob", f"https://{host}/*")}, text,
                         f"fetching pages under https://{host}/")
    raise UnmappedRule(f"Signoff cannot tell which {tool} calls “{content[:80]}” covers")


def _label(raw: Mapping[str, Any]) -> str:
    kind = raw.get("type")
    if kind in ("addRules", "replaceRules", "removeRules") and isinstance(raw.get("rules"), list):
        rules = ", ".join(rule_text(r) for r in raw["rules"] if isinstance(r, Mapping)) or "no rules"
        verb = {"addRules": str(raw.get("behavior") or "?"), "replaceRules": "replace with",
                "removeRules": "remove"}[str(kind)]
        return f"{verb} {rules}"
    if kind == "setMode":
        return f"switch to {raw.get('mode')} mode"
    if kind in ("addDirectories", "removeDirectories"):
        dirs = ", ".join(str(d) for d in raw.get("directories") or [])
        return f"{'add' if kind == 'addDirectories' else 'remove'} directories {dirs}"
    return f"a {str(kind)[:40]} update"


def read_one(index: int, raw: Mapping[str, Any], request: Request) -> Suggestion:
    """One suggestion: offered (with its grants and scope) or why not. Request-wide limits are `offers`'."""
    label = _label(raw)

    def no(why: str) -> Suggestion:
        return Suggestion(index, raw, label, why_not=why)

    if raw.get("type") != "addRules":
        return no("Signoff remembers tool rules (addRules), not this kind of change")
    if raw.get("behavior") != "allow":
        return no(f"it would {raw.get('behavior')} calls, not allow them")
    rules = [r for r in raw.get("rules") or [] if isinstance(r, Mapping)]
    if not rules:
        return no("it holds no rules")
    try:
        grants = tuple(rule_grant(request.action.name, r) for r in rules)
    except UnmappedRule as exc:
        return no(str(exc))
    destination = raw.get("destination") or "session"
    label = ", ".join(g.rule for g in grants)
    if destination == "session":
        run = run_of(request.extra)
        if run is None:
            return no("it is for Claude's session, and the request names no session")
        return Suggestion(index, raw, label, grants, Scope.RUN, run)
    if destination in SETTINGS:
        agent = agent_of(request.extra)  # the token that made the request, never its requested_by label
        if agent is None:
            return no("it is for this agent, and the request was not made with an API token that names the agent")
        return Suggestion(index, raw, label, grants, Scope.AGENT, agent)
    return no(f"Claude would keep it in {str(destination)[:40]}, which Signoff cannot scope a grant to")


def single_approval_refusal(request: Request) -> str | None:
    """Why no suggestion may be accepted in one tap on this request, or None."""
    if request.kind is not Kind.APPROVAL or request.is_batch:
        return "only single approvals can remember a suggestion"
    if not isinstance(request.extra.get("policy"), dict):
        return "grants apply only under a policy file (SIGNOFF_POLICY), so Signoff would not remember it"
    if request.risk is Risk.CRITICAL:
        return "critical requests are never remembered"
    if request.confirm is not None:
        return "this request needs typed confirmation"
    if request.quorum > 1:
        return f"this request needs {request.quorum} approvals, and a grant needs one person's decision"
    if "approve" not in allowed_decisions(request.kind, request.extra):
        return "Approve is not offered for this request"
    return None


def offers(request: Request) -> list[Suggestion]:
    """Every suggestion of `request`, in order, each offered or with why not."""
    given = request.extra.get(EXTRA_KEY)
    if not isinstance(given, list):
        return []
    refusal = single_approval_refusal(request)
    found: list[Suggestion] = []
    offered = 0
    for index, raw in enumerate(given[:MAX_SUGGESTIONS]):
        if not isinstance(raw, Mapping):
            continue
        one = read_one(index, raw, request)
        if one.offered and refusal is not None:
            one = Suggestion(index, raw, one.label, why_not=refusal)
        elif one.offered:
            offered += 1
            if offered > MAX_OFFERS:
                one = Suggestion(index, raw, one.label, why_not=f"only the first {MAX_OFFERS} are offered")
        found.append(one)
    return found


def offered(request: Request, index: int) -> Suggestion | None:
    """The suggestion at `index` if it is offered on `request` (what a click may accept), else None."""
    return next((s for s in offers(request) if s.index == index and s.offered), None)
