"""The server's decision-signing key: which one, where it is kept, and signing with it.

SIGNOFF_SIGNING_KEY (an Ed25519 private key: its 32-byte seed, base64url, as `signoff keys --new`
prints) wins when set: every replica given the same value signs alike. When it is not set, the key is
the database's (storage/signing_keys.py): made on the first start, kept, and the same for every replica
that shares the database (SQLite: the file's). Its public half is served at /.well-known/signoff-keys and
printed by `signoff keys`; the agent side pins it (SIGNOFF_PUBLIC_KEY) and checks every decision.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bot.domain.signatures import ALG, FINAL, signed_bytes

if TYPE_CHECKING:  # settings import this module for its check of SIGNOFF_SIGNING_KEY: no SQL for them
    from storage.signing_keys import SigningKeyStore


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def key_id(public: bytes) -> str:
    """A short, stable name for a public key: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(public).hexdigest()[:16]


def private_from_seed(seed: str) -> Ed25519PrivateKey:
    """The key from its base64url seed; ValueError naming the problem if it is not one."""
    try:
        raw = unb64(seed.strip())
    except (ValueError, TypeError):
        raise ValueError("not base64url") from None
    if len(raw) != 32:
        raise ValueError(f"an Ed25519 seed is 32 bytes, this is {len(raw)}")
    return Ed25519PrivateKey.from_private_bytes(raw)


def new_seed() -> str:
    return b64(Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()))


class Signer:
    """Signs the JSON of ended requests (bot/domain/signatures.py); deterministic, as Ed25519 is."""

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        self.public_raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.kid = key_id(self.public_raw)

    @classmethod
    def from_seed(cls, seed: str) -> Signer:
        return cls(private_from_seed(seed))

    @property
    def public_key(self) -> str:
        """The public key as SIGNOFF_PUBLIC_KEY takes it: `<kid>:<base64url>`."""
        return f"{self.kid}:{b64(self.public_raw)}"

    def keys_json(self) -> dict[str, Any]:
        """What /.well-known/signoff-keys serves."""
        return {"keys": [{"kid": self.kid, "alg": ALG, "public_key": b64(self.public_raw)}]}

    def sign(self, body: dict[str, Any]) -> dict[str, Any]:
        """`body` with its `signature` when the request has ended (a pending one has nothing to sign)."""
        if body.get("status") in FINAL:
            body["signature"] = {"alg": ALG, "kid": self.kid,
                                 "sig": b64(self._private.sign(signed_bytes(body, self.kid)))}
        return body

    def sign_each(self, bodies: list[Mapping[str, Any]]) -> list[Any]:
        return [self.sign(dict(b)) for b in bodies]


async def load_signer(configured: str | None, keys: SigningKeyStore, now: datetime) -> Signer:
    """The configured key, or the database's (made now if there is none yet)."""
    if configured is not None:
        return Signer.from_seed(configured)
    seed = new_seed()
    made = Signer.from_seed(seed)
    _, stored = await keys.get_or_make((made.kid, seed, b64(made.public_raw)), now)
    return Signer.from_seed(stored)
