"""Agent API for policy and grants.

    GET  /api/v1/policy                 the loaded policy: path, sha256, rules, last reload error
    GET  /api/v1/grants                 live grants (not revoked, not expired; `effect` allow or deny), newest first: an `agent`
                                        token sees the grants made on its own requests (every grant
                                        scoped to it among them); an `admin` token sees them all
    POST /api/v1/grants                 405: no API call creates a grant
    POST /api/v1/grants/{id}/revoke     admin tokens only (403 for an agent token); body empty or {}.
                                        Recorded as `api:<token name>`; a `by` field is refused (400)

Grants come only from a person's explicit choice in Slack (the "Approve & remember" modal, a Claude
suggestion's "Approve & always allow"), recorded with the clicking person's user id from the signed
Slack request (bot/slack/grant_handlers.py, bot/slack/suggestion_handlers.py). A bearer token, which
agents hold, can neither make one nor name who made or revoked one.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict

from bot.api import owners
from bot.api.routes import error_response
from bot.api.schemas import parse_body
from bot.domain.grants import Grant
from bot.domain.model import iso
from bot.errors import Forbidden, InvalidInput, NotFound
from bot.approvals.grants import Grants
from bot.policy.holder import PolicyHolder

GRANTS = web.AppKey("grants", Grants)
POLICY = web.AppKey("policy", PolicyHolder)
NO_API_GRANTS = ("Grants are made only by a person in Slack (\"Approve & remember\" on a card, or a suggestion's "
                 "\"Approve & always allow\"); no API call creates one.")
API_ACTOR = "api:"  # + the token's name: who revoked a grant through the API


def grant_json(grant: Grant) -> dict[str, Any]:
    return {
        "id": grant.id, "tool": grant.tool, "match": grant.match_json(), "scope": grant.scope.value,
        "scope_value": grant.scope_value, "created_by": grant.created_by, "created_at": iso(grant.created_at),
        "expires_at": iso(grant.expires_at), "revoked_at": iso(grant.revoked_at), "revoked_by": grant.revoked_by,
        "request_id": grant.request_id, "any_other_params": grant.any_other_params, "effect": grant.effect,
    }


async def get_policy(request: web.Request) -> web.Response:
    return web.json_response(request.app[POLICY].status())


async def list_grants(request: web.Request) -> web.Response:
    token = owners.token_of(request)
    grants = await request.app[GRANTS].of_token(token.name, admin=token.admin, limit=500)
    return web.json_response({"items": [grant_json(g) for g in grants]})


async def create_grant(request: web.Request) -> web.Response:
    response = error_response(405, "method_not_allowed", NO_API_GRANTS)
    response.headers["Allow"] = "GET"
    return response


class RevokeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    by: Any = None  # refused when given: who revoked is the token, never what the body says


async def revoke_grant(request: web.Request) -> web.Response:
    token = owners.token_of(request)
    if not token.admin:  # before any lookup: an agent token learns nothing about which grants exist
        raise Forbidden("only an admin token may revoke a grant through the API; people revoke grants in Slack "
                        "(`/signoff grants` or the Home tab)")
    body: RevokeIn = parse_body(RevokeIn, await request.read())
    if "by" in body.model_fields_set:
        message = f"not accepted: a revoke through the API is recorded as the token that made it ({API_ACTOR}{token.name})"
        raise InvalidInput(f"invalid request body: by: {message}", details=[{"field": "by", "message": message}])
    store = request.app[GRANTS]
    grant_id = request.match_info["id"]
    if await store.get(grant_id) is None:
        raise NotFound(f"no grant with id {grant_id!r}")
    await store.revoke(grant_id, API_ACTOR + token.name)
    grant = await store.get(grant_id)
    assert grant is not None
    return web.json_response(grant_json(grant))


def add_routes(app: web.Application, grants: Grants, policy: PolicyHolder) -> None:
    app[GRANTS], app[POLICY] = grants, policy
    app.router.add_get("/api/v1/policy", get_policy)
    app.router.add_get("/api/v1/grants", list_grants)
    app.router.add_post("/api/v1/grants", create_grant)
    app.router.add_post("/api/v1/grants/{id}/revoke", revoke_grant)
