"""Signed webhook delivery to an agent's `callback_url`, retried through the outbox.

Each POST carries:
    X-Signoff-Timestamp: unix seconds
    X-Signoff-Signature: v1=<hex HMAC-SHA256(secret, "v1:{timestamp}:{raw body}")>
    X-Signoff-Delivery:  a stable id for this delivery (same on every retry; dedupe on it)
Delivery is at least once: a receiver that answers 2xx is not called again for it. Failed attempts
are retried with capped exponential backoff until SIGNOFF_WEBHOOK_MAX_AGE (default 24 h) or
SIGNOFF_WEBHOOK_MAX_ATTEMPTS; `POST /api/v1/approvals/{id}/redeliver` sends it again later
(a new X-Signoff-Delivery id, the same body).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from datetime import timedelta
from typing import Any

import aiohttp

from bot.process.clock import Clock
from bot.approvals.keys import Signer
from bot.domain.model import AuditEvent
from bot.outbox.egress import EgressPolicy, EgressRefused, Unresolvable, check_url
from bot.process.metrics import Metrics
from bot.outbox import effects
from bot.outbox.effects import Handler
from bot.outbox.dispatcher import Dead, Done, Result, Retry, backoff
from bot.domain.outbox import OutboxItem

TIMEOUT_SECONDS = 10.0
DEFAULT_MAX_AGE = timedelta(hours=24)  # SIGNOFF_WEBHOOK_MAX_AGE
DEFAULT_BACKOFF_CAP = 1800.0  # SIGNOFF_WEBHOOK_BACKOFF_CAP_SECONDS: at most 30 minutes between attempts


def _hours(age: timedelta) -> str:
    return f"{age.total_seconds() / 3600:.1f} h"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"v1:{timestamp}:".encode() + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def verify(secret: str, timestamp: str, body: bytes, signature: str, *, tolerance: float = 300) -> bool:
    """For receivers (and our tests): check a delivery's signature and freshness."""
    try:
        if abs(time.time() - int(timestamp)) > tolerance:
            return False
    except ValueError:
        return False
    return hmac.compare_digest(sign(secret, timestamp, body), signature)


class WebhookDelivery:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        secret: str | None,
        *,
        clock: Clock,
        metrics: Metrics,
        max_attempts: int,
        timeout: float = TIMEOUT_SECONDS,
        policy: EgressPolicy | None = None,
        max_age: timedelta = DEFAULT_MAX_AGE,
        backoff_cap: float = DEFAULT_BACKOFF_CAP,
        signer: Signer | None = None,
    ) -> None:
        self.signer = signer  # the decision's own signature, as on the API (bot/approvals/keys.py)
        self.max_age = max_age
        self.backoff_cap = backoff_cap
        self.policy = policy or EgressPolicy()
        self.timeout = timeout
        self.session = session
        self.secret = secret
        self.clock = clock
        self.metrics = metrics
        self.max_attempts = max_attempts

    def handlers(self) -> dict[str, Handler]:
        return {effects.WEBHOOK: self}

    async def __call__(self, item: OutboxItem) -> Result:
        url: str = item.payload["url"]
        payload = item.payload["body"]
        if self.signer is not None and isinstance(payload.get("request"), dict):
            payload = {**payload, "request": self.signer.sign(dict(payload["request"]))}
        body = json.dumps(payload, separators=(",", ":")).encode()
        try:
            # Checked again at delivery (it was at submit): a name can point elsewhere by now.
            await check_url(url, self.policy)
        except Unresolvable as exc:
            outcome: str | None = str(exc)
        except EgressRefused as exc:
            self.metrics.webhook_failures.inc()
            return Dead(f"refused: {exc}", (self._audit(item, "webhook_failed", {"url": url, "error": str(exc)}),))
        else:
            outcome = await self._post(url, body, item)
        if outcome is None:
            return Done(audit=(self._audit(item, "webhook_delivered", {"url": url, "attempts": item.attempts}),))
        age = self.clock.now() - item.created_at if item.created_at is not None else timedelta(0)
        if item.attempts >= self.max_attempts or age >= self.max_age:
            self.metrics.webhook_failures.inc()
            error = f"gave up after {item.attempts} attempts over {_hours(age)}: {outcome}"
            return Dead(error, (self._audit(item, "webhook_failed", {"url": url, "error": error}),))
        # Capped exponential backoff: a receiver down for a deploy (or a night) still gets it.
        return Retry(backoff(item.attempts, base=1.0, cap=self.backoff_cap), outcome)

    async def _post(self, url: str, body: bytes, item: OutboxItem) -> str | None:
        """None on a 2xx answer, else what went wrong."""
        timestamp = str(int(time.time()))
        headers: dict[str, Any] = {
            "Content-Type": "application/json",
            "User-Agent": "Signoff-Webhook/1",
            "X-Signoff-Timestamp": timestamp,
            "X-Signoff-Delivery": item.dedupe_key,
        }
        if self.secret:
            headers["X-Signoff-Signature"] = sign(self.secret, timestamp, body)
        try:
            async with self.session.post(
                url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=self.timeout),
                allow_redirects=False,
            ) as response:
                if 200 <= response.status < 300:
                    return None
                return f"HTTP {response.status}"
        except EgressRefused as exc:  # the connector's own check (DNS rebinding since check_url)
            return str(exc)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

    def _audit(self, item: OutboxItem, kind: str, data: dict[str, Any]) -> AuditEvent:
        return AuditEvent(item.request_id or "", kind, self.clock.now(), None, data)
