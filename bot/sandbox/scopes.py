"""Which OAuth scopes each emulated Web API method needs, and Slack's ``missing_scope`` answer.

Scopes are only checked when the emulator is given a scope set (``SlackEmulator.scopes``); a method
needs any one of its listed scopes (conversations.history takes channels:history for channels,
groups:history for private ones, ...). Sources: SLACK_FACTS.md section 5, Slack's method pages.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

_HISTORY = ("channels:history", "groups:history", "im:history", "mpim:history")
_READ = ("channels:read", "groups:read", "im:read", "mpim:read")

NEEDED: dict[str, tuple[str, ...]] = {
    "chat.postMessage": ("chat:write",),
    "chat.update": ("chat:write",),
    "chat.delete": ("chat:write",),
    "chat.postEphemeral": ("chat:write",),
    "conversations.history": _HISTORY,
    "conversations.replies": _HISTORY,
    "conversations.info": _READ,
    "conversations.members": _READ,
    "conversations.open": ("im:write", "mpim:write", "channels:manage", "groups:write"),
    "conversations.join": ("channels:join",),
    "users.info": ("users:read",),
    "usergroups.list": ("usergroups:read",),
    "usergroups.users.list": ("usergroups:read",),
}


def missing_scope(method: str, granted: Iterable[str]) -> dict[str, Any] | None:
    """Slack's error body when `granted` lacks every scope `method` accepts; None when allowed."""
    needed = NEEDED.get(method)
    have = set(granted)
    if not needed or have.intersection(needed):
        return None
    return {"ok": False, "error": "missing_scope", "needed": needed[0], "provided": ",".join(sorted(have))}
