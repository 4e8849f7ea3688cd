"""API tokens: a name, the secret, and a scope. What a token may see and change.

    SIGNOFF_API_TOKENS=deploy-bot:s3cret-token-1:agent,ops:s3cret-token-2:admin,legacy-token-3

An entry is `name:token:scope`, `name:token` (scope agent), or a bare token (the old form: named
`token-N`, scope admin, so existing setups keep working).

Scopes:
    agent   creates requests, runs and questions; reads, cancels and redelivers only its own
    admin   everything, every token's requests included

A request or run belongs to the token that made it (its name is stored with it); another agent
token gets 404 for it, as if it did not exist.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from dataclasses import dataclass

SCOPES = ("agent", "admin")
MIN_TOKEN_CHARS = 8
MAX_NAME_CHARS = 100  # a name is stored with what its token creates (requests.owner is 100 wide)


@dataclass(frozen=True)
class ApiToken:
    name: str
    secret: str
    scope: str

    @property
    def admin(self) -> bool:
        return self.scope == "admin"

    def __repr__(self) -> str:  # never the secret
        return f"ApiToken(name={self.name!r}, scope={self.scope!r})"


def parse_tokens(raw: str) -> tuple[ApiToken, ...]:
    """Parse SIGNOFF_API_TOKENS; ValueError with a message that names no secret."""
    tokens: list[ApiToken] = []
    for index, entry in enumerate((e.strip() for e in raw.split(",")), start=1):
        if not entry:
            continue
        parts = entry.split(":")
        if len(parts) == 1:
            token = ApiToken(f"token-{len(tokens) + 1}", parts[0], "admin")
        elif len(parts) in (2, 3):
            scope = parts[2].strip().lower() if len(parts) == 3 else "agent"
            token = ApiToken(parts[0].strip(), parts[1].strip(), scope)
        else:
            raise ValueError(f"entry {index} is not name:token:scope")
        if not token.name:
            raise ValueError(f"entry {index} has no name")
        if len(token.name) > MAX_NAME_CHARS:
            raise ValueError(f"entry {index}: a token's name is at most {MAX_NAME_CHARS} characters")
        if token.scope not in SCOPES:
            raise ValueError(f"entry {index} ({token.name}): scope must be one of {', '.join(SCOPES)}")
        if len(token.secret) < MIN_TOKEN_CHARS:
            raise ValueError(f"every token must be at least {MIN_TOKEN_CHARS} characters")
        tokens.append(token)
    names = [t.name for t in tokens]
    if len(set(names)) != len(names):
        raise ValueError("token names must be unique")
    return tuple(tokens)


def bearer(header: str | None) -> bytes | None:
    """The token an `Authorization: Bearer ...` header presents, as the bytes that were sent (None: none).

    aiohttp decodes header bytes as UTF-8 with surrogate escapes: encoding back the same way gives the
    bytes that were sent, whatever they are (not UTF-8, not latin-1), so a bad header is refused, never a 500.
    """
    scheme, _, given = (header or "").partition(" ")
    given = given.strip()
    if scheme.lower() != "bearer" or not given:
        return None
    return given.encode("utf-8", "surrogateescape")


def matching(presented: bytes | None, secrets: Sequence[str]) -> list[int]:
    """The indexes of `secrets` equal to `presented`, compared with every one (no early exit), so the
    time taken says nothing about which matched."""
    if presented is None:
        return []
    return [i for i, secret in enumerate(secrets) if hmac.compare_digest(presented, secret.encode())]
