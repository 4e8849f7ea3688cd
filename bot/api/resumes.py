"""Resume claims held by the server, so resumers on any machine apply a decision once.

    POST /api/v1/resumes                  {"key", "owner", "lease_seconds"?, "request_ids"?}: claim
                                          200 {"key", "state": "resuming", "owner", "lease_until", "won": true}
                                          409 resume_taken (details: [{"state", "owner", "lease_until"}])
    POST /api/v1/resumes/{key}/renew      {"owner", "lease_seconds"?}: extend the holder's lease (409 if not)
    POST /api/v1/resumes/{key}/finish     {"owner", "state": "done" | "failed", "error"?}: end it
    GET  /api/v1/resumes/{key}            its state

Keys are the calling token's own (`owners.token_of`): another token's key of the same text is another
claim. The key in a path is percent-encoded by the client (it may hold "/" and ":"). Writes are
counted against the token's own bucket (`RESUME_RATE`, the submit rate's settings), before the body
is read: a token that floods claims is answered 429 and costs the database nothing.
"""

from __future__ import annotations

from typing import Annotated, Literal

from aiohttp import web
from pydantic import Field, StringConstraints

from bot.api import owners
from bot.api.rate import SubmitRate
from bot.api.schemas import _Strict, parse_body
from bot.approvals.resumes import Resumes
from bot.domain import resumes as r
from bot.domain.json_codec import dumps
from bot.errors import InvalidInput

RESUMES = web.AppKey("resumes", Resumes)
RESUME_RATE = web.AppKey("resume_rate", SubmitRate)

Key = Annotated[str, StringConstraints(min_length=1, max_length=r.MAX_KEY)]
Owner = Annotated[str, StringConstraints(min_length=1, max_length=r.MAX_OWNER)]
Lease = Annotated[int, Field(ge=r.MIN_LEASE_SECONDS, le=r.MAX_LEASE_SECONDS, strict=True)]
RequestId = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class ClaimIn(_Strict):
    key: Key
    owner: Owner
    lease_seconds: Lease = r.DEFAULT_LEASE_SECONDS
    request_ids: list[RequestId] = Field(default_factory=list, max_length=r.MAX_REQUEST_IDS)


class RenewIn(_Strict):
    owner: Owner
    lease_seconds: Lease = r.DEFAULT_LEASE_SECONDS


class FinishIn(_Strict):
    owner: Owner
    state: Literal["done", "failed"]
    error: str | None = Field(default=None, max_length=r.MAX_ERROR)


def _key(request: web.Request) -> str:
    key = request.match_info["key"]
    if not 1 <= len(key) <= r.MAX_KEY:
        raise InvalidInput(f"key must be 1 to {r.MAX_KEY} characters",
                           details=[{"field": "key", "message": f"1 to {r.MAX_KEY} characters"}])
    return key


def _counted(request: web.Request) -> str:
    """The calling token's name, once this write is counted against its bucket."""
    name = owners.token_of(request).name
    request.app[RESUME_RATE].take(name)
    return name


def _answer(claim: r.ResumeClaim, *, won: bool | None = None) -> web.Response:
    return web.json_response(claim.to_json(won=won), dumps=dumps)


async def claim_resume(request: web.Request) -> web.Response:
    token = _counted(request)
    body: ClaimIn = parse_body(ClaimIn, await request.read())
    claim = await request.app[RESUMES].claim(token, body.key, body.owner, lease_seconds=body.lease_seconds,
                                             request_ids=body.request_ids)
    return _answer(claim, won=True)


async def renew_resume(request: web.Request) -> web.Response:
    token = _counted(request)
    key = _key(request)
    body: RenewIn = parse_body(RenewIn, await request.read())
    return _answer(await request.app[RESUMES].renew(token, key, body.owner, lease_seconds=body.lease_seconds),
                   won=True)


async def finish_resume(request: web.Request) -> web.Response:
    token = _counted(request)
    key = _key(request)
    body: FinishIn = parse_body(FinishIn, await request.read())
    return _answer(await request.app[RESUMES].finish(token, key, body.owner, r.ResumeState(body.state), body.error))


async def get_resume(request: web.Request) -> web.Response:
    return _answer(await request.app[RESUMES].get(owners.token_of(request).name, _key(request)))


def add_routes(app: web.Application, resumes: Resumes, rate: SubmitRate) -> None:
    app[RESUMES], app[RESUME_RATE] = resumes, rate
    app.router.add_post("/api/v1/resumes", claim_resume)
    # `.+`: a key may hold "/" (sent as %2F). Only GET is on the bare key, so ".../renew" is never ambiguous.
    app.router.add_post("/api/v1/resumes/{key:.+}/renew", renew_resume)
    app.router.add_post("/api/v1/resumes/{key:.+}/finish", finish_resume)
    app.router.add_get("/api/v1/resumes/{key:.+}", get_resume)
