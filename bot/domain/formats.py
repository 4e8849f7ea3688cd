"""The JSON Schema `format`s an edit is checked against, beyond what plain jsonschema does.

jsonschema checks `uri` and `date-time` with rfc3986-validator and rfc3339-validator (both are
dependencies), and `date` itself. Its `email` check is only "contains an @", so "@" or "a@b" pass;
`email` here is a sane address instead (no regex): exactly one "@" with text on both sides, no
whitespace, and a domain of at least two dot-separated, non-empty labels ("a@example.com").
It does not try to be RFC 5322: quoted local parts with a second "@" are refused.
"""

from __future__ import annotations

# What a tool's parameter may declare (bot/agent/tools.py `Format`), in the order the docs list them.
KNOWN = ("email", "uri", "date-time", "date")


def is_email(instance: object) -> bool:
    if not isinstance(instance, str):
        return True  # `format` applies to strings only; `type` says what else is wrong
    local, at, domain = instance.partition("@")
    if not at or not local or not domain or "@" in domain:
        return False
    if any(c.isspace() for c in instance):
        return False
    labels = domain.split(".")
    return len(labels) >= 2 and all(labels)
