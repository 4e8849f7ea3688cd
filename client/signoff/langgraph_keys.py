"""What Signoff's LangGraph interrupts are made of: their marker, their requests' keys, their values.

Shared by the node helpers (`signoff.langgraph`), the interrupt adapter (`signoff.langgraph_hitl`)
and the `Resumer`; no I/O and no LangGraph import.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

MARKER = "signoff"  # the interrupt value's key that says "a Signoff request answers this"
KEY_MAX = 255


def interrupt_key(kind: str, thread_id: str, namespace: str, index: int | str) -> str:
    """The Idempotency-Key of one interrupt's request: readable when short, hashed when not."""
    key = f"lg:{kind}:{thread_id}:{namespace}:{index}"
    if len(key) <= KEY_MAX:
        return key
    return f"lg:{kind}:sha256:{hashlib.sha256(key.encode()).hexdigest()}"


def signoff_value(kind: str, request: Mapping[str, Any]) -> dict[str, Any]:
    """The value `approval()` / `ask()` interrupt with: the request id, and what a UI would show."""
    value: dict[str, Any] = {MARKER: {"request_id": request["id"], "kind": kind}, "summary": request.get("summary")}
    if kind == "approval":
        action = request.get("action") or {}
        value["action"] = {"name": action.get("name"), "params": action.get("params")}
    else:
        value["questions"] = request.get("questions")
    return value
