"""Checking the server's signature on a decision before anything runs.

The server signs every ended request with Ed25519 (the server's bot/approvals/keys.py) over its id,
kind and status, the action's name and proposed parameters, the outcome, the exact parameters to run
with (and each batch item's), a question's answers, when it was decided, and the key's id. Here the same
bytes are rebuilt from the body that arrived and checked against a trusted public key, so that nothing
between the agent and the server can forge a decision, alter one, or hand one request's decision (or
signature) to another: `Decision.from_request` (every way the agent side learns of a decision) calls
`check`, and a decision that fails it raises `SignatureInvalid`, so nothing runs.

Which keys are trusted, per process:
- SIGNOFF_PUBLIC_KEY (`<kid>:<base64url>`, comma-separated; `signoff keys` on the server prints it): these,
  and a key fetched later only when one of them endorses it (below). The setting that protects against a
  tampering proxy from the first request on.
- Otherwise a `SignoffClient` fetches its server's keys from /.well-known/signoff-keys before its first
  call and trusts them for the process (trust on first use).

Rotation (the server's `signoff keys rotate`): the server publishes every key it has signed with, each with
its id, `since`/`until`, and for each key made by a rotation the previous key's signature over it
(`endorsement`, over `endorsed_bytes`). When a decision names a key id this process does not know, the
client (and the hook) fetch the keys again, at most once per `REFRESH_MIN` seconds per server, and take a
new key only if a key they already trust endorses it (a chain of rotations is followed), so a proxy
cannot slip its own key in through a refresh. The fetched set is also read again after `STALE` seconds,
so a retirement reaches a long-lived agent. A retired key (`retired_at`) verifies only decisions decided
before it was retired: a stolen key cannot sign new ones.
Once a process trusts a key, every decision it reads must carry a valid signature by a trusted key. A
process that has no key at all (no setting, no client made yet: a bare webhook receiver, whose body is
HMAC-signed) cannot check, and says so in `trusted()`.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

from signoff.errors import SignatureInvalid, SignoffError

PREFIX = b"signoff-decision-v1\n"
ALG = "Ed25519"
FINAL = ("approved", "rejected", "expired", "cancelled", "answered")
KEYS_PATH = "/.well-known/signoff-keys"
KEY_PREFIX = b"signoff-key-v1\n"
REFRESH_MIN = 30.0  # seconds between two fetches of one server's keys prompted by an unknown key id
STALE = 300.0  # seconds after which a fetched key set is read again (before the next call)


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


def endorsed_bytes(kid: str, public_key: str) -> bytes:
    """What a key's endorsement covers (the same function as the server's bot/domain/signatures.py)."""
    text = json.dumps({"v": 1, "kid": kid, "public_key": public_key}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True)
    return KEY_PREFIX + text.encode()


def _when(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def signing_kids(body: Any, depth: int = 0) -> Iterator[str]:
    """The key ids of the signatures in a response's JSON (a request, `{"request": ...}`, a list of items)."""
    if isinstance(body, dict):
        found = body.get("signature")
        if isinstance(found, dict) and isinstance(found.get("kid"), str):
            yield found["kid"]
        if depth < 2:
            for value in body.values():
                if isinstance(value, (dict, list)):
                    yield from signing_kids(value, depth + 1)
    elif isinstance(body, list) and depth < 2:
        for value in body:
            yield from signing_kids(value, depth + 1)


def _verifies(public: bytes, signature: str, data: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(public).verify(_unb64(signature), data)
    except (InvalidSignature, ValueError):
        return False
    return True


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

    def __init__(self, environ: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        env = os.environ if environ is None else environ
        configured = (env.get("SIGNOFF_PUBLIC_KEY") or "").strip()
        self.configured = bool(configured)
        self._keys: dict[str, bytes] = parse_keys(configured) if configured else {}
        self._retired: dict[str, datetime] = {}  # kid -> when the server retired it
        self._fetched: dict[str, float] = {}  # server URL -> when its keys were last read (this clock)
        self._refreshed: dict[str, float] = {}  # server URL -> when an unknown key id last made us read them
        self.fetches = 0  # how many key sets were taken (tests: refreshes stay bounded)

    def trusted(self) -> bool:
        return bool(self._keys)

    def knows(self, kid: str) -> bool:
        return kid in self._keys

    def wants_fetch(self, url: str) -> bool:
        """Whether to read the keys of the server at `url` before the next call: never yet (unless keys are
        configured), or the set read is older than `STALE`."""
        last = self._fetched.get(url)
        if last is None:
            return not self.configured
        return self._clock() - last >= STALE

    def wants_refresh(self, url: str, body: Any) -> bool:
        """Whether `body` names a key this process does not trust and the keys of `url` may be read again
        now (at most once per `REFRESH_MIN` seconds)."""
        if not any(kid not in self._keys for kid in signing_kids(body)):
            return False
        now = self._clock()
        with self._lock:
            last = self._refreshed.get(url)
            if last is not None and now - last < REFRESH_MIN:
                return False
            self._refreshed[url] = now  # claimed: the caller reads the keys now (failed or not, once per period)
        return True

    def pin(self, url: str, keys_json: Any) -> None:
        """Take the keys the server at `url` served. The first set from a server, when no key is configured,
        is trusted as it is; after that, a key is taken only if a trusted key endorses it. Retirements are
        taken for keys already trusted."""
        entries: list[dict[str, Any]] = []
        for entry in (keys_json or {}).get("keys") or [] if isinstance(keys_json, dict) else []:
            if isinstance(entry, dict) and entry.get("alg") == ALG and isinstance(entry.get("kid"), str):
                try:
                    raw = _unb64(str(entry.get("public_key")))
                except ValueError:
                    continue
                if len(raw) == 32:
                    entries.append({**entry, "raw": raw})
        if not entries:
            raise SignoffError(f"the server's {KEYS_PATH} named no Ed25519 key: cannot check its decisions")
        with self._lock:
            first = not self.configured and url not in self._fetched
            self.fetches += 1
            self._fetched[url] = self._clock()
            if first:  # trust on first use
                self._keys.update({e["kid"]: e["raw"] for e in entries})
            else:
                self._endorsed(entries)
            for e in entries:
                retired = _when(e.get("retired_at")) if e.get("retired_at") else None
                if retired is not None and e["kid"] in self._keys and self._keys[e["kid"]] == e["raw"]:
                    self._retired[e["kid"]] = retired

    def _endorsed(self, entries: list[dict[str, Any]]) -> None:
        """Take every entry a trusted key endorses, following a chain of rotations (under the lock)."""
        waiting = [e for e in entries if e["kid"] not in self._keys]
        taken = True
        while waiting and taken:
            taken = False
            for e in list(waiting):
                by, endorsement = e.get("endorsed_by"), e.get("endorsement")
                signer = self._keys.get(by) if isinstance(by, str) else None
                if signer is not None and isinstance(endorsement, str) and _verifies(
                        signer, endorsement, endorsed_bytes(e["kid"], str(e["public_key"]))):
                    self._keys[e["kid"]] = e["raw"]
                    waiting.remove(e)
                    taken = True

    def check(self, body: Mapping[str, Any]) -> None:
        """Raise SignatureInvalid unless an ended request's body is signed by a trusted key (no-op while
        none is trusted; a pending body has nothing to check)."""
        if body.get("status") not in FINAL or not self._keys:
            return
        rid = body.get("id")
        sig = body.get("signature")
        if not isinstance(sig, dict) or sig.get("alg") != ALG:
            raise SignatureInvalid(f"request {rid}: the decision is not signed; nothing may run on it",
                                   request_id=str(rid))
        kid = sig.get("kid")
        key = self._keys.get(kid) if isinstance(kid, str) else None
        if key is None or not isinstance(kid, str):
            raise SignatureInvalid(f"request {rid}: the decision is signed by key {str(kid)[:40]!r}, which this "
                                   "agent does not trust (neither SIGNOFF_PUBLIC_KEY nor endorsed by a key it "
                                   "trusts)", request_id=str(rid))
        if not _verifies(key, str(sig.get("sig")), signed_bytes(body, kid)):
            raise SignatureInvalid(f"request {rid}: the decision's signature does not match it (altered, or "
                                   "another request's); nothing may run on it", request_id=str(rid))
        retired = self._retired.get(kid)
        if retired is not None:
            decided = _when((body.get("decision") or {}).get("decided_at"))
            if decided is None or decided.tzinfo is None or decided >= retired:
                raise SignatureInvalid(f"request {rid}: the decision is signed by key {kid}, which the server "
                                       f"retired at {retired.isoformat()}, before it was decided; nothing may "
                                       "run on it", request_id=str(rid))


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
