"""Which API token a request belongs to, and the check that another agent token cannot reach it.

The token's name is stored with what it creates (`extra["api_token"]` on requests, the
`run_created` audit row on runs). An `agent` token reaching another token's request gets 404,
the same answer as for an id that does not exist; an `admin` token reaches everything.
"""

from __future__ import annotations

import hashlib
from typing import Any

from aiohttp import web

from bot.api.tokens import ApiToken
from bot.errors import NotFound

MAX_KEY = 255  # the stored idempotency key's width
OWNER = "api_token"  # the key in request.extra / the run_created audit data
TOKEN = web.RequestKey("api_token", ApiToken)


def token_of(request: web.Request) -> ApiToken:
    return request[TOKEN]  # set by bearer_auth, which runs first on /api/


def stamp(request: web.Request) -> dict[str, Any]:
    """What to store with a new request or run so that it belongs to the calling token."""
    return {OWNER: token_of(request).name}


def scoped_key(request: web.Request, key: str | None) -> str | None:
    """Idempotency keys are per token: another token's key can never return (or collide with) ours."""
    if key is None:
        return None
    token = token_of(request)
    if token.admin:
        return key
    scoped = f"{token.name}:{key}"
    # Keys are stored in 255 characters: a long key under its token's prefix is kept as its digest, so
    # the longest key an agent may send is stored (and found again) instead of overflowing the column.
    return scoped if len(scoped) <= MAX_KEY else "sha256:" + hashlib.sha256(scoped.encode()).hexdigest()


def may_see(request: web.Request, owner: Any) -> bool:
    token = token_of(request)
    return token.admin or owner == token.name


def check(request: web.Request, owner: Any, what: str, ident: str) -> None:
    if not may_see(request, owner):
        raise NotFound(f"no {what} with id {ident!r}")
