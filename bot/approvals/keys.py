"""The server's decision-signing keys: which one signs, which are published, rotating and retiring them.

SIGNOFF_SIGNING_KEY (an Ed25519 private key: its 32-byte seed, base64url, as `signoff keys --new`
prints) wins when set: every replica given the same value signs alike, and it is the only key published.
When it is not set, the keys are the database's (storage/signing_keys.py): the first made on the first
start, the same for every replica that shares the database (SQLite: the file's).

Rotation (`signoff keys rotate`): a new key becomes the current one, endorsed by the previous key (its
signature over the new key's id and public half: bot/domain/signatures.py's `endorsed_bytes`), so an
agent that trusts the old key takes the new one without being reconfigured. Every earlier key stays
published at /.well-known/signoff-keys with its `since`/`until`, so decisions and receipts signed by it
still verify, offline too. Retiring a key (`signoff keys retire KID`, never the current one) publishes
`retired_at`: the agent side refuses a decision signed by it and decided after that. Every replica reads
the keys again at each timer sweep (`DecisionKeys.refresh`), so a rotation made from a shell reaches all
of them within one sweep; until then a replica signs with the previous key, which stays valid.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bot.domain.audit_chain import Anchor
from bot.domain.signatures import ALG, FINAL, anchor_bytes, endorsed_bytes, signed_bytes
from bot.domain.values import iso
from bot.errors import Conflict, InvalidInput, NotFound

if TYPE_CHECKING:  # settings import this module for its check of SIGNOFF_SIGNING_KEY: no SQL for them
    from storage.signing_keys import KeyRow, SigningKeyStore


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


@dataclass(frozen=True)
class PublishedKey:
    """A public key as /.well-known/signoff-keys lists it."""

    kid: str
    public_key: str  # base64url of the 32 raw bytes
    current: bool = True
    since: datetime | None = None
    until: datetime | None = None
    retired_at: datetime | None = None
    endorsed_by: str | None = None
    endorsement: str | None = None

    @property
    def status(self) -> str:
        return "retired" if self.retired_at is not None else "current" if self.current else "previous"

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"kid": self.kid, "alg": ALG, "public_key": self.public_key, "status": self.status}
        for name in ("since", "until", "retired_at"):
            value = getattr(self, name)
            if value is not None:
                found[name] = iso(value)
        if self.endorsement is not None:
            found["endorsed_by"], found["endorsement"] = self.endorsed_by, self.endorsement
        return found


class Signer:
    """Signs the JSON of ended requests (bot/domain/signatures.py) with the current key; deterministic, as
    Ed25519 is. `adopt` swaps the key in place (a rotation seen by `DecisionKeys.refresh`): every holder
    (the API, the webhooks) signs with the new one from then on."""

    def __init__(self, private: Ed25519PrivateKey, published: Sequence[PublishedKey] = ()) -> None:
        self.adopt(private, published)

    def adopt(self, private: Ed25519PrivateKey, published: Sequence[PublishedKey] = ()) -> None:
        raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self._state = (private, raw, key_id(raw))  # one assignment: a signature never mixes two keys
        self.published = tuple(published) or (PublishedKey(key_id(raw), b64(raw)),)

    @classmethod
    def from_seed(cls, seed: str, published: Sequence[PublishedKey] = ()) -> Signer:
        return cls(private_from_seed(seed), published)

    @property
    def kid(self) -> str:
        return self._state[2]

    @property
    def public_raw(self) -> bytes:
        return self._state[1]

    @property
    def public_key(self) -> str:
        """The current public key as SIGNOFF_PUBLIC_KEY takes it: `<kid>:<base64url>`."""
        return f"{self.kid}:{b64(self.public_raw)}"

    @property
    def public_keys(self) -> str:
        """Every published key not retired, as SIGNOFF_PUBLIC_KEY takes them (comma-separated)."""
        return ",".join(f"{k.kid}:{k.public_key}" for k in self.published if k.retired_at is None)

    def keys_json(self) -> dict[str, Any]:
        """What /.well-known/signoff-keys serves: the current key first, then the earlier ones."""
        return {"keys": [k.to_json() for k in self.published]}

    def sign(self, body: dict[str, Any]) -> dict[str, Any]:
        """`body` with its `signature` when the request has ended (a pending one has nothing to sign)."""
        if body.get("status") in FINAL:
            private, _, kid = self._state
            body["signature"] = {"alg": ALG, "kid": kid, "sig": b64(private.sign(signed_bytes(body, kid)))}
        return body

    def sign_bytes(self, make: Any) -> dict[str, str]:
        """{"alg", "kid", "sig"} over `make(kid)` (bytes that name the key that signs them)."""
        private, _, kid = self._state
        return {"alg": ALG, "kid": kid, "sig": b64(private.sign(make(kid)))}

    def sign_each(self, bodies: list[Mapping[str, Any]]) -> list[Any]:
        return [self.sign(dict(b)) for b in bodies]


def _published(row: KeyRow) -> PublishedKey:
    return PublishedKey(row.kid, row.public_key, row.current, row.since, row.until, row.retired_at,
                        row.endorsed_by, row.endorsement)


class DecisionKeys:
    """The database's keys behind one process's `Signer` (none of this when SIGNOFF_SIGNING_KEY is set)."""

    def __init__(self, store: SigningKeyStore | None, signer: Signer) -> None:
        self.store = store
        self.signer = signer

    @property
    def configured(self) -> bool:
        return self.store is None

    async def refresh(self) -> bool:
        """Read the keys again; True when the current key changed (a rotation by another process)."""
        if self.store is None:
            return False
        rows = await self.store.all()
        current = next((r for r in rows if r.current), None)
        if current is None:
            return False
        changed = current.kid != self.signer.kid
        published = tuple(_published(r) for r in rows)
        if changed:
            self.signer.adopt(private_from_seed(current.private_key), published)
        else:
            self.signer.published = published
        return changed

    async def rotate(self, now: datetime) -> tuple[str, str]:
        """Make a new key current, endorsed by the current one; (old kid, new kid). Conflict when another
        rotation won meanwhile (nothing written here)."""
        from storage.signing_keys import KeyRow

        if self.store is None:
            raise InvalidInput("SIGNOFF_SIGNING_KEY is set: the key is the setting's. Rotate by setting a new one "
                               "(`signoff keys --new`) and list both public keys in the agents' SIGNOFF_PUBLIC_KEY")
        await self.refresh()
        old = self.signer
        seed = new_seed()
        made = Signer.from_seed(seed)
        endorsement = old.sign_bytes(lambda _kid: endorsed_bytes(made.kid, b64(made.public_raw)))
        row = KeyRow(kid=made.kid, private_key=seed, public_key=b64(made.public_raw), current=True, since=now,
                     until=None, retired_at=None, endorsed_by=endorsement["kid"], endorsement=endorsement["sig"])
        if not await self.store.rotate(endorsement["kid"], row, now):
            raise Conflict("another rotation made a new key meanwhile; nothing was changed here (run "
                           "`signoff keys` to see the current key)")
        old_kid = endorsement["kid"]
        await self.refresh()
        return old_kid, made.kid

    async def retire(self, kid: str, now: datetime) -> None:
        """Withdraw an earlier key: decisions signed by it after now are refused by the agent side."""
        if self.store is None:
            raise InvalidInput("SIGNOFF_SIGNING_KEY is set: there are no earlier keys kept here to retire")
        found = await self.store.retire(kid, now)
        if found == "current":
            raise Conflict(f"key {kid} is the current key: rotate first (`signoff keys rotate`), then retire it")
        if found == "unknown":
            raise NotFound(f"no signing key has the id {kid!r} (`signoff keys` lists them)")
        if found == "already":
            raise Conflict(f"key {kid} was retired already")
        await self.refresh()


async def load_keys(configured: str | None, keys: SigningKeyStore, now: datetime) -> DecisionKeys:
    """The configured key, or the database's (the first made now if there is none yet) and every earlier one."""
    if configured is not None:
        return DecisionKeys(None, Signer.from_seed(configured))
    seed = new_seed()
    made = Signer.from_seed(seed)
    _, stored = await keys.get_or_make((made.kid, seed, b64(made.public_raw)), now)
    found = DecisionKeys(keys, Signer.from_seed(stored))
    await found.refresh()
    return found


async def load_signer(configured: str | None, keys: SigningKeyStore, now: datetime) -> Signer:
    """The configured key, or the database's (made now if there is none yet)."""
    return (await load_keys(configured, keys, now)).signer


def anchor_problem(anchor: Anchor, published: Sequence[PublishedKey]) -> str | None:
    """Why `anchor`'s signature does not hold under the published keys, or None when it does."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    key = next((k for k in published if k.kid == anchor.kid), None)
    if key is None:
        return f"the anchor is signed by key {anchor.kid!r}, which this server does not publish"
    if key.retired_at is not None and anchor.at >= key.retired_at:
        return f"the anchor is signed by key {anchor.kid}, retired at {iso(key.retired_at)} before it was made"
    at = iso(anchor.at)
    assert at is not None
    try:
        Ed25519PublicKey.from_public_bytes(unb64(key.public_key)).verify(
            unb64(anchor.sig), anchor_bytes(anchor.seq, anchor.hash, at, anchor.kid))
    except (InvalidSignature, ValueError):
        return "the anchor's signature does not match it: it was altered, or not made by this server"
    return None
