"""Claude Code permission rules (`Bash(npm test *)`, `WebFetch(domain:example.com)`) read as
parameter matches Signoff can keep in a grant. Pure.

Invariant: a match made here never covers a call that Claude Code's own rule would not. Where
Signoff cannot be sure (path rules, which Claude resolves against settings files and the working
directory; unusual shells), the rule is not mapped at all: the caller says why and asks again.

Bash rules, as Claude Code documents them:
- `npm test:*` (older prefix syntax) and `npm test *` (trailing ` *`): `npm test` itself, or
  `npm test` followed by a space and anything;
- `*` elsewhere: any text there (`git * --dry-run`);
- no `*`: exactly that command.
A command only ever matches if it is ONE simple command: Claude Code splits `a && b` and checks
each part, which a single pattern cannot do, so any shell control character (`;`, `&`, `|`, `$`,
backquotes, `<`, `>`, parentheses, newlines) makes the command not match, and a rule that holds
one is not mapped.
"""

from __future__ import annotations

import re

SHELL_CONTROL = frozenset(";&|$`<>()\n\r")
MAX_RULE = 500
_DOMAIN = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$")


class UnmappedRule(ValueError):
    """A rule Signoff cannot turn into a match; the message says why, in plain words."""


def _has_control(text: str) -> bool:
    return any(c in SHELL_CONTROL for c in text)


def command_regex(rule: str) -> re.Pattern[str]:
    """The regex (for `fullmatch`) of a Bash rule's content. Raises UnmappedRule."""
    rule = rule.strip()
    if not rule or len(rule) > MAX_RULE:
        raise UnmappedRule("its command pattern is empty or too long")
    if _has_control(rule):
        raise UnmappedRule("its command pattern holds shell operators (;, &&, |, $, redirects), which one "
                           "pattern cannot check safely")
    tail = ""
    if rule.endswith(":*"):
        rule, tail = rule[:-2].rstrip(), r"(?:\s.*)?"
    elif rule.endswith(" *"):
        rule, tail = rule[:-2].rstrip(), r"(?:\s.*)?"
    if not rule and tail:  # `:*` or ` *` alone: any command at all
        return re.compile(r".*", re.DOTALL)
    body = ".*".join(re.escape(part) for part in rule.split("*"))
    return re.compile(body + tail, re.DOTALL)


def command_matches(pattern: re.Pattern[str], command: object) -> bool:
    """Whether `command` (a Bash call's `command`) is one simple command the rule covers."""
    if not isinstance(command, str) or _has_control(command):
        return False
    return pattern.fullmatch(command.strip()) is not None


def describe_command(rule: str) -> str:
    """Plain words for a Bash rule's content."""
    rule = rule.strip()
    if rule.endswith((":*", " *")):
        stem = rule[:-2].rstrip()
        return f"Bash commands that start with “{stem}”" if stem else "any single Bash command"
    if "*" in rule:
        return f"Bash commands like “{rule}” (* stands for any text)"
    return f"exactly the Bash command “{rule}”"


def web_domain(rule: str) -> str:
    """The host of a `WebFetch(domain:HOST)` rule. Raises UnmappedRule."""
    if not rule.startswith("domain:"):
        raise UnmappedRule("Signoff only reads WebFetch rules of the form domain:example.com")
    host = rule[len("domain:"):].strip().lower()
    if not _DOMAIN.match(host):
        raise UnmappedRule(f"“{host[:80]}” is not a plain host name (wildcards are not mapped)")
    return host
