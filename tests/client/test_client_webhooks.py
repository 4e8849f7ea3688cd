"""The agent side reads Signoff's webhooks as the server signs them (bot/api/webhooks.py), and nothing else:
a delivery passes only with the server's signature over its exact bytes, made within five minutes."""

from __future__ import annotations

import json
import time

import pytest

from bot.api.webhooks import sign as server_sign
from signoff.errors import SignoffError, WebhookRefused
from signoff.webhooks import read, sign, verify

SECRET = "s3cret"
BODY = json.dumps({"type": "approval.decided", "request": {
    "id": "apr_1", "status": "approved",
    "decision": {"outcome": "approved", "params": {"amount": 35}, "via": "modal"}}}, separators=(",", ":")).encode()


def headers(body: bytes = BODY, *, secret: str = SECRET, at: float | None = None) -> dict[str, str]:
    timestamp = str(int(time.time() if at is None else at))
    return {"X-Signoff-Timestamp": timestamp, "X-Signoff-Signature": server_sign(secret, timestamp, body),
            "X-Signoff-Delivery": "webhook:apr_1:decided"}


def test_the_signature_is_the_servers() -> None:
    assert sign(SECRET, "1700000000", BODY) == server_sign(SECRET, "1700000000", BODY)
    assert verify(SECRET, "1700000000", BODY, server_sign(SECRET, "1700000000", BODY), now=1700000100)


def test_a_delivery_signed_now_is_read_with_its_decision() -> None:
    hook = read(BODY, {k.lower(): v for k, v in headers().items()}, SECRET)  # header names in any case
    assert hook.type == "approval.decided" and hook.request_id == "apr_1"
    assert hook.delivery == "webhook:apr_1:decided"
    assert hook.decision is not None and hook.decision.params == {"amount": 35}


def refusals() -> dict[str, tuple[bytes, dict[str, str]]]:
    """Deliveries the server did not sign just now: (body, headers) by what is wrong with them."""
    tampered = BODY.replace(b"35", b"99")
    return {
        "other secret": (BODY, headers(secret="guess")),
        "an hour old": (BODY, headers(at=time.time() - 3600)),
        "from the future": (BODY, headers(at=time.time() + 3600)),
        "body changed after signing": (tampered, headers(BODY)),
        "unsigned": (BODY, {}),
        "no timestamp": (BODY, {"X-Signoff-Signature": headers()["X-Signoff-Signature"]}),
        "timestamp not a number": (BODY, {**headers(), "X-Signoff-Timestamp": "soon"}),
    }


@pytest.mark.parametrize("case", list(refusals()))
def test_anything_the_server_did_not_sign_just_now_is_a_401(case: str) -> None:
    body, given = refusals()[case]
    with pytest.raises(WebhookRefused) as refused:
        read(body, given, SECRET)
    assert refused.value.status == 401 and refused.value.message


@pytest.mark.parametrize("body", [b"not json", b"[]", b'{"type": "approval.decided"}',
                                  b'{"type": "approval.decided", "request": {"status": "approved"}}'])
def test_a_signed_body_of_the_wrong_shape_is_a_400(body: bytes) -> None:
    with pytest.raises(WebhookRefused) as refused:
        read(body, headers(body), SECRET)
    assert refused.value.status == 400
    assert isinstance(refused.value, SignoffError)


def test_reading_without_a_secret_is_a_mistake_said_at_once() -> None:
    with pytest.raises(ValueError, match="SIGNOFF_WEBHOOK_SECRET"):
        read(BODY, headers(), "")
