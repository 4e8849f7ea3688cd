"""`signoff hook claude-code` as a PermissionRequest hook: its input and output shapes.

A PermissionRequest hook runs only when Claude Code would ask (after its own allow and deny rules
and the permission mode), and its input carries `permission_suggestions` ("always allow
Bash(npm test *)"). Its answer is not PreToolUse's:

    {"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                            "decision": {"behavior": "allow", "updatedInput": {...},
                                         "updatedPermissions": [<the accepted suggestion>]}}}
    {"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                            "decision": {"behavior": "deny", "message": "..."}}}

(checked against the schema in the bundled Claude Code 2.1.x; an `updatedPermissions` entry is
the suggestion exactly as Claude Code sent it). "Ask" is no output at all: Claude Code then shows
its own prompt (in `-p` mode that is a denial). There is no `defer` for this event.
"""

from __future__ import annotations

import json
from typing import Any

EVENT = "PermissionRequest"


def as_permission_request(pre_tool_use: dict[str, Any], accepted: dict[str, Any] | None = None) -> dict[str, Any]:
    """The PermissionRequest answer for a PreToolUse-shaped one (allow / deny / ask / defer)."""
    out = pre_tool_use.get("hookSpecificOutput") or {}
    decision = out.get("permissionDecision")
    reason = str(out.get("permissionDecisionReason") or "Signoff: no decision")
    if decision == "allow":
        body: dict[str, Any] = {"behavior": "allow"}
        if out.get("updatedInput") is not None:
            body["updatedInput"] = out["updatedInput"]
        if accepted is not None:
            body["updatedPermissions"] = [accepted]
        return {"hookSpecificOutput": {"hookEventName": EVENT, "decision": body}}
    if decision == "ask":
        return {}
    return {"hookSpecificOutput": {"hookEventName": EVENT, "decision": {"behavior": "deny", "message": reason}}}


def event_of(raw: str) -> str | None:
    """The `hook_event_name` of raw hook input, read leniently (to shape even an error's answer)."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    name = data.get("hook_event_name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None
