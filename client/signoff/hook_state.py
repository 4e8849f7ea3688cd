"""Approvals bound to the state they were made on, for the Claude Code hook.

A `Write`/`Edit`/`MultiEdit` preview is a diff against the file on disk; the hook sends what it was
computed from as the request's `state` (`signoff.claude_tools.file_state`). When a person approves,
the hook reads the file again before it answers: if it changed since the preview was made, the call
is not allowed on that approval. The request is reported `skipped` ("the file changed since you
approved") and the person is asked again with the new preview, under the next key of the call's
chain (`<key>`, `<key>:again:1`, ...): derived again by a retry, a resumed session, and the
PostToolUse hook that reports what ran. After MAX_ASKS changes the call is denied.
"""

from __future__ import annotations

from collections.abc import Iterator

MAX_ASKS = 3
CHANGED = "not run: the file changed since you approved; asked again with the new preview"
CHANGED_SUMMARY = " (the file changed since you approved)"


def chain_keys(base_key: str) -> Iterator[str]:
    """The keys a call's requests are submitted under, in order: the first ask, then each ask again."""
    yield base_key
    for n in range(1, MAX_ASKS):
        yield f"{base_key}:again:{n}"


def changed_context(request_id: str) -> str:
    return (f" ⚠️ The file changed since you approved {request_id}: this is the new preview, computed "
            "from the file as it is now.")


def still_current(approved_state: str | None, now: str | None) -> bool:
    """An approval without a state (an older request) is not bound to one."""
    return approved_state is None or approved_state == now
