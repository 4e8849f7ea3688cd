"""The shape of a Slack Web API error: HTTP 200 with ``{"ok": false, "error": code}``.

Validation errors also carry ``response_metadata.messages`` (``"[ERROR] ... [json-pointer:/blocks/0]"``),
which is how Slack says *why* (for example ``invalid_blocks``). Only injected faults and the posting
pace (429 with ``Retry-After``) answer with another HTTP status.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """Raised by a Web API method of the emulator; becomes Slack's error body."""

    def __init__(self, error: str, messages: list[str] | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.messages = messages or []

    def body(self) -> dict[str, Any]:
        """The JSON Slack answers for this error."""
        out: dict[str, Any] = {"ok": False, "error": self.error}
        if self.messages:
            out["response_metadata"] = {"messages": self.messages}
        return out
