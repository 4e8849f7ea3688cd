"""Checking the server's signature on a decision before anything runs.

The server signs every ended request with Ed25519 (the server's bot/approvals/keys.py) over its id,
kind and status, the action's name and proposed parameters, the outcome, the exact parameters to run
with (and each batch item's), a question's answers, when it was decided, and the key's id. Here the same
bytes are rebuilt from the body that arrived and checked against a trusted public key, so that nothing
between the agent and the server can forge a decision, alter one, or hand one request's decision (or
signature) to another: `Decision.from_request` (every way the agent side learns of a decision) calls
`check`, and a decision that fails it raises `SignatureInvalid`, so nothing runs.

Which keys are trusted, per process:
- SIGNOFF_PUBLIC_KEY (`<kid>:<base64url>`, comma-separated for a key rotation; `signoff keys` on the
  server prints it): only these, never one fetched. The setting that protects against a tampering
  proxy from the first request on.
- Otherwise a `SignoffClient` fetches its server's keys from /.well-known/signoff-keys once per process
  and server URL, before its first call, and pins them for the process (trust on first use; a later
  change of key there is not taken).
Once a process trusts a key, every decision it reads must carry a valid signature by it. A process that
has no key at all (no setting, no client made yet: a bare webhook receiver, whose body is HMAC-signed)
cannot check, and says so in `trusted()`.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Mapping
from typing import Any

from signoff.errors import SignatureInvalid, SignoffError

PREFIX = b"signoff-decision-v1\n"
ALG = "Ed25519"
FINAL = ("approved", "rejected", "expired", "cancelled", "answered")
KEYS_PATH = "/.well-known/signoff-keys"


def signed_fields(body: Mapping[str, Any], kid: str) -> dict[str, Any]:
    """The fields the signature covers (the same function as the server's bot/domain/signatures.py)."""
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
    text = json.dumps(signed_fields(body, kid), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return PREFIX + text.encode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def parse_keys(text: str) -> dict[str, bytes]:
    """SIGNOFF_PUBLIC_KEY's `kid:base64url[,kid:base64url...]` as {kid: 32 raw bytes}; SignoffError if bad."""
    found: dict[str, bytes] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        kid, sep, raw = part.partition(":")
        try:
            key = _unb64(raw) if sep else b""
        except ValueError:
            key = b""
        if not kid or len(key) != 32:
            raise SignoffError(f"SIGNOFF_PUBLIC_KEY: {part[:60]!r} is not <kid>:<base64url Ed25519 public key> "
                               "(the server's `signoff keys` prints it)")
        found[kid] = key
    return found


class Keyring:
    """The public keys this process trusts (see the module docstring)."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._lock = threading.Lock()
        env = os.environ if environ is None else environ
        configured = (env.get("SIGNOFF_PUBLIC_KEY") or "").strip()
        self.configured = bool(configured)
        self._keys: dict[str, bytes] = parse_keys(configured) if configured else {}
        self._fetched: set[str] = set()  # the servers whose keys were pinned (a process may reach several)

    def trusted(self) -> bool:
        return bool(self._keys)

    def wants_fetch(self, url: str) -> bool:
        """Whether the server at `url` has not given its keys to this process yet (never when configured)."""
        return not self.configured and url not in self._fetched

    def pin(self, url: str, keys_json: Any) -> None:
        """Trust the keys the server at `url` served, from now on (never when keys are configured)."""
        found: dict[str, bytes] = {}
        for entry in (keys_json or {}).get("keys") or [] if isinstance(keys_json, dict) else []:
            if isinstance(entry, dict) and entry.get("alg") == ALG and isinstance(entry.get("kid"), str):
                try:
                    raw = _unb64(str(entry.get("public_key")))
                except ValueError:
                    continue
                if len(raw) == 32:
                    found[entry["kid"]] = raw
        if not found:
            raise SignoffError(f"the server's {KEYS_PATH} named no Ed25519 key: cannot check its decisions")
        with self._lock:
            if not self.configured and url not in self._fetched:
                self._fetched.add(url)
                self._keys.update(found)

    def check(self, body: Mapping[str, Any]) -> None:
        """Raise SignatureInvalid unless an ended request's body is signed by a trusted key (no-op while
        none is trusted; a pending body has nothing to check)."""
        if body.get("status") not in FINAL or not self._keys:
            return
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        rid = body.get("id")
        sig = body.get("signature")
        if not isinstance(sig, dict) or sig.get("alg") != ALG:
            raise SignatureInvalid(f"request {rid}: the decision is not signed; nothing may run on it",
                                   request_id=str(rid))
        kid = sig.get("kid")
        key = self._keys.get(kid) if isinstance(kid, str) else None
        if key is None or not isinstance(kid, str):
            raise SignatureInvalid(f"request {rid}: the decision is signed by key {str(kid)[:40]!r}, which this "
                                   "agent does not trust (SIGNOFF_PUBLIC_KEY)", request_id=str(rid))
        try:
            Ed25519PublicKey.from_public_bytes(key).verify(_unb64(str(sig.get("sig"))), signed_bytes(body, kid))
        except (InvalidSignature, ValueError):
            raise SignatureInvalid(f"request {rid}: the decision's signature does not match it (altered, or "
                                   "another request's); nothing may run on it", request_id=str(rid)) from None


_KEYRING: list[Keyring] = []  # made on first use: a bad SIGNOFF_PUBLIC_KEY fails the first check, not the import


def keyring() -> Keyring:
    """This process's keyring."""
    if not _KEYRING:
        _KEYRING.append(Keyring())
    return _KEYRING[0]


def reset(environ: Mapping[str, str] | None = None) -> Keyring:
    """Read SIGNOFF_PUBLIC_KEY again and forget pinned keys (tests; a long-lived process after a rotation)."""
    _KEYRING[:] = [Keyring(environ)]
    return _KEYRING[0]
