"""What a decision's signature covers: pure bytes from the JSON agents see (no key, no I/O).

The server signs, with Ed25519, `PREFIX + canonical JSON` of these fields of a request that has ended:
its id, kind and status, the action's name and proposed parameters, the decision's outcome, the exact
parameters to run with (`decision.params`, and each batch item's), the answers to a question, when it was
decided, the Idempotency-Key it was submitted under (as stored: `<token name>:<key>` for an agent token),
and the key's id. The agent side (client/signoff/signatures.py) rebuilds the same bytes from the
body it received and checks the signature before anything runs, so a body altered on the way, another
request's signature, or another request's whole decision are refused. The two copies of this function
must agree; tests/api/test_signed_decisions.py checks one against the other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

PREFIX = b"signoff-decision-v1\n"
ALG = "Ed25519"
FINAL = ("approved", "rejected", "expired", "cancelled", "answered")


def signed_fields(body: Mapping[str, Any], kid: str) -> dict[str, Any]:
    decision = body.get("decision") or {}
    action = body.get("action") or {}
    return {
        "v": 1, "kid": kid, "request_id": body.get("id"), "kind": body.get("kind"), "status": body.get("status"),
        "action": action.get("name"), "proposed": action.get("params"),
        "outcome": decision.get("outcome"), "params": decision.get("params"), "items": decision.get("items"),
        "answers": body.get("answers"), "decided_at": decision.get("decided_at"),
        "idempotency_key": body.get("idempotency_key"),
    }


def signed_bytes(body: Mapping[str, Any], kid: str) -> bytes:
    """The bytes signed for `body` (a request's wire JSON) under key `kid`."""
    text = json.dumps(signed_fields(body, kid), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return PREFIX + text.encode()


KEY_PREFIX = b"signoff-key-v1\n"
ANCHOR_PREFIX = b"signoff-audit-head-v1\n"


def _canonical(fields: Mapping[str, Any]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def endorsed_bytes(kid: str, public_key: str) -> bytes:
    """What the previous key signs when a rotation makes key `kid` (its public half, base64url) current:
    an agent that trusts the previous key takes the new one only with this signature (the agent side's
    client/signoff/signatures.py rebuilds the same bytes)."""
    return KEY_PREFIX + _canonical({"v": 1, "kid": kid, "public_key": public_key})


def anchor_bytes(seq: int, head_hash: str, at: str, kid: str) -> bytes:
    """What an audit anchor's signature covers: the chain's head (position, hash), when, and the key's id."""
    return ANCHOR_PREFIX + _canonical({"v": 1, "seq": seq, "hash": head_hash, "at": at, "kid": kid})
