"""Claude's permission suggestions on the agent side: sent with a request, handed back when accepted.

Claude Code offers "permission updates" with a call that reaches "ask" (the Agent SDK's
`ToolPermissionContext.suggestions`, a PermissionRequest hook's `permission_suggestions`). Signoff
shows them on the card; when a person taps "Approve & always allow ...", the decision names the
accepted one (`Decision.accepted_suggestion`), and the integration returns exactly that update to
Claude Code (`updated_permissions` / `updatedPermissions`) so Claude remembers it too.

A suggestion never costs an approval: ones that cannot be sent are left out, and if the server
refuses the list (an older server, a shape it does not know) the request is made without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from signoff.errors import SignoffRequestError

MAX_SENT = 10  # the server takes at most 10


def as_sent(suggestions: Sequence[Any] | None) -> list[tuple[Any, dict[str, Any]]]:
    """(original, JSON form) for each suggestion that can be sent, in order (at most MAX_SENT).

    SDK `PermissionUpdate`s become their wire dicts (`to_dict`, which raises for a malformed one:
    left out); dicts (a hook's input) are sent as they came.
    """
    sent: list[tuple[Any, dict[str, Any]]] = []
    for item in suggestions or ():
        if len(sent) >= MAX_SENT:
            break
        try:
            wire = item.to_dict() if hasattr(item, "to_dict") else item
        except (ValueError, TypeError, AttributeError):
            continue
        if isinstance(wire, dict):
            sent.append((item, wire))
    return sent


def refused(exc: SignoffRequestError) -> bool:
    """Whether the server refused the request because of its `suggestions` (or `session`) field."""
    if exc.status not in (400, 422):
        return False
    details = exc.details if isinstance(exc.details, list) else []
    fields = [str(d.get("field", "")) for d in details if isinstance(d, dict)]
    return any(f.split(".")[0] in ("suggestions", "session") for f in fields) or (
        not fields and "suggestions" in str(exc.message))


def accepted(decision: Any, sent: list[tuple[Any, dict[str, Any]]]) -> Any | None:
    """The original suggestion the person accepted (to hand back to Claude Code), or None."""
    found = getattr(decision, "accepted_suggestion", None)
    if found is None:
        return None
    index, update = found
    if 0 <= index < len(sent) and sent[index][1] == update:
        return sent[index][0]
    return None
