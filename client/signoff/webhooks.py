"""Reading Signoff's signed webhooks on the agent side: check the signature, then trust the body.

Signoff POSTs `{"type": "approval.decided", "request": {...}}` to a request's `callback_url` with

    X-Signoff-Timestamp: unix seconds
    X-Signoff-Signature: v1=<hex HMAC-SHA256(SIGNOFF_WEBHOOK_SECRET, "v1:{timestamp}:{raw body}")>
    X-Signoff-Delivery:  the same on every retry of one delivery (deduplicate on it)

(the server's bot/api/webhooks.py signs them; the scheme is repeated here rather than imported:
the agent side never imports the server).

Invariants:
- Nothing in a body is parsed before its signature is checked, in constant time, against the raw
  bytes, and its timestamp is within `tolerance` seconds of now (an old delivery replayed is refused).
- Every refusal is a `WebhookRefused` carrying the HTTP status a receiver should answer (401: unsigned,
  wrongly signed or stale; 400: signed but not a webhook's shape) and one line saying why.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from signoff.errors import WebhookRefused
from signoff.models import Decision, final_decision

TIMESTAMP = "X-Signoff-Timestamp"
SIGNATURE = "X-Signoff-Signature"
DELIVERY = "X-Signoff-Delivery"
TOLERANCE = 300.0  # seconds a delivery's timestamp may be off from this machine's clock
DECIDED = "approval.decided"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The `X-Signoff-Signature` value Signoff sends for `body` at `timestamp`."""
    mac = hmac.new(secret.encode(), f"v1:{timestamp}:".encode() + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def verify(secret: str, timestamp: str, body: bytes, signature: str, *, tolerance: float = TOLERANCE,
           now: float | None = None) -> bool:
    """True when `signature` is Signoff's for `body` at `timestamp`, and `timestamp` is fresh."""
    try:
        sent = int(timestamp)
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - sent) > tolerance:
        return False
    return hmac.compare_digest(sign(secret, timestamp, body), signature)


@dataclass(frozen=True)
class Webhook:
    """A delivery whose signature checked out: its event `type`, the request's JSON, the delivery id."""

    type: str
    request: dict[str, Any]
    delivery: str | None = None

    @property
    def request_id(self) -> str:
        return str(self.request.get("id"))

    @property
    def decision(self) -> Decision | None:
        """How the request ended (None if the event is about a request still pending)."""
        return final_decision(self.request)


def read(body: bytes, headers: Mapping[str, str], secret: str, *, tolerance: float = TOLERANCE,
         now: float | None = None) -> Webhook:
    """The webhook in a POST's raw `body` and `headers` (any capitalisation), once its signature is checked.

    Raises `WebhookRefused` (with the status to answer) for anything Signoff did not sign just now."""
    if not secret:
        raise ValueError("read() needs the secret the server signs with (its SIGNOFF_WEBHOOK_SECRET)")
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    timestamp, signature = lower.get(TIMESTAMP.lower()), lower.get(SIGNATURE.lower())
    if not timestamp or not signature:
        raise WebhookRefused(f"unsigned: {TIMESTAMP} and {SIGNATURE} are required", status=401)
    if not verify(secret, timestamp, body, signature, tolerance=tolerance, now=now):
        raise WebhookRefused("the signature does not match this body and timestamp, or the timestamp is more "
                             f"than {tolerance:g} s away from now (another secret? a replay?)", status=401)
    try:
        event = json.loads(body)
    except ValueError:
        raise WebhookRefused("the body is not JSON", status=400) from None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str) \
            or not isinstance(event.get("request"), dict) or not event["request"].get("id"):
        raise WebhookRefused('the body is not {"type": ..., "request": {"id": ...}}', status=400)
    return Webhook(event["type"], event["request"], lower.get(DELIVERY.lower()))
