"""Which request a decision belongs to: the client's checks beside the signature's (signoff.signatures).

A decision with a valid signature is still refused when it answers another request: another id than
the one waited on, or a request submitted under another Idempotency-Key than this call's (a forged
submit answer that points the agent at an old approval of the same action).
"""

from __future__ import annotations

from typing import Any

import signoff._protocol as p
from signoff.errors import SignatureInvalid
from signoff.models import Decision, final_decision

Json = dict[str, Any]


def ended(body: Json, request_id: str, key: str | None = None) -> Decision | None:
    """The request's final decision, None while it is pending; `UndeliverableError` if nobody can see it.
    `SignatureInvalid` if the answer is another request's: another id, or (when `key` is the Idempotency-Key
    this client submitted it under) a decision signed for a request made under another key."""
    if body.get("id") != request_id:
        raise SignatureInvalid(f"asked for request {request_id}, the answer is for {str(body.get('id'))[:60]}: "
                               "nothing may run on it", request_id=request_id)
    found = checked(body, key)
    if found is None and (refused := p.undeliverable(body)) is not None:
        raise refused
    return found


def checked(body: Json, key: str | None) -> Decision | None:
    """`final_decision(body)` (its signature checked there), bound to the key it was submitted under."""
    found = final_decision(body)
    stored = body.get("idempotency_key")
    if found is not None and key is not None and not (
            stored == key or (isinstance(stored, str) and (stored.endswith(":" + key) or stored.startswith("sha256:")))):
        # A long key is stored as a digest of the token's name and the key: it cannot be matched here.
        raise SignatureInvalid(f"request {body.get('id')} was not submitted under this call's Idempotency-Key: "
                               "another request's decision, replayed; nothing may run on it",
                               request_id=str(body.get("id")))
    return found


class Keys:
    """The Idempotency-Key each request this client submitted was sent under (the newest few thousand)."""

    LIMIT = 4096

    def __init__(self) -> None:
        self._by_id: dict[str, str] = {}

    def note(self, request_id: str, key: str) -> str:
        if len(self._by_id) >= self.LIMIT:
            self._by_id.pop(next(iter(self._by_id)))
        self._by_id[request_id] = key
        return key

    def of(self, request_id: str) -> str | None:
        return self._by_id.get(request_id)
