"""Agent API for policy and grants.

    GET  /api/v1/policy                 the loaded policy: path, sha256, rules, last reload error
    GET  /api/v1/grants                 live grants (not revoked, not expired), newest first
    POST /api/v1/grants                 create a grant (an Agent SDK permission suggestion a person
                                        accepted, or any integration that asked and was told "always")
    POST /api/v1/grants/{id}/revoke     revoke it; matching calls ask again from the next request on

POST /api/v1/grants body:
    {"tool": "send_email",
     "match": {"to": {"op": "glob", "value": "*@example.com"}, "subject": {"op": "eq", "value": "Hi"}},
     "scope": "everyone" | "channel" | "agent" | "run",  "scope_value": "C0123ABCD",
     "duration": "1h" | "1d" | "7d" | "forever"  (or any duration like "90m"),
     "created_by": "U0123ABCD", "request_id": "apr_..."}
A grant matches only calls of `tool` with exactly the parameter names in `match`, each matching
its value (`eq`: equal; `glob`: case-insensitive pattern). It never applies to critical calls.
It must come from a person: `request_id` is an approval of the same tool (not critical) that
`created_by` approved in Slack, and `match` lists exactly that call's parameter names. A bearer
token alone (agents hold them) cannot grant anything.
"""

from __future__ import annotations

from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bot.api.schemas import parse_body
from bot.clock import Clock, new_id
from bot.domain.durations import DurationError, parse_duration
from bot.domain.grants import FieldMatch, Grant, Scope
from bot.domain.model import iso
from bot.errors import NotFound
from bot.policy_holder import PolicyHolder
from bot.grants import Grants

GRANTS = web.AppKey("grants", Grants)
POLICY = web.AppKey("policy", PolicyHolder)
CLOCK = web.AppKey("grants_clock", Clock)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FieldMatchIn(_Strict):
    op: Literal["eq", "glob"]
    value: Any

    @model_validator(mode="after")
    def _glob_is_text(self) -> FieldMatchIn:
        if self.op == "glob" and not isinstance(self.value, str):
            raise ValueError("a glob value must be a string")
        return self


class GrantIn(_Strict):
    tool: str = Field(min_length=1, max_length=200)
    match: dict[str, FieldMatchIn] = Field(default_factory=dict, max_length=100)
    scope: Scope
    scope_value: str | None = Field(default=None, max_length=200)
    duration: str = "1d"
    created_by: str = Field(pattern=r"^[UW][A-Z0-9]{1,39}$")
    request_id: str = Field(min_length=1, max_length=40)  # the approval the person accepted the suggestion on

    @field_validator("duration")
    @classmethod
    def _duration(cls, value: str) -> str:
        if value != "forever":
            try:
                parse_duration(value)
            except DurationError as exc:
                raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _scope_value(self) -> GrantIn:
        if self.scope is Scope.EVERYONE and self.scope_value is not None:
            raise ValueError("scope_value must be absent for scope everyone")
        if self.scope is not Scope.EVERYONE and not self.scope_value:
            raise ValueError(f"scope {self.scope.value} needs a scope_value (the {self.scope.value} it is for)")
        return self


def grant_json(grant: Grant) -> dict[str, Any]:
    return {
        "id": grant.id, "tool": grant.tool, "match": grant.match_json(), "scope": grant.scope.value,
        "scope_value": grant.scope_value, "created_by": grant.created_by, "created_at": iso(grant.created_at),
        "expires_at": iso(grant.expires_at), "revoked_at": iso(grant.revoked_at), "revoked_by": grant.revoked_by,
        "request_id": grant.request_id, "any_other_params": grant.any_other_params,
    }


async def get_policy(request: web.Request) -> web.Response:
    return web.json_response(request.app[POLICY].status())


async def list_grants(request: web.Request) -> web.Response:
    grants = await request.app[GRANTS].live(limit=500)
    return web.json_response({"items": [grant_json(g) for g in grants]})


async def create_grant(request: web.Request) -> web.Response:
    body: GrantIn = parse_body(GrantIn, await request.read())
    grants, now = request.app[GRANTS], request.app[CLOCK].now()
    grant = Grant(
        id=new_id("grt"), tool=body.tool, match={k: FieldMatch(v.op, v.value) for k, v in body.match.items()},
        scope=body.scope, scope_value=body.scope_value, created_by=body.created_by, created_at=now,
        expires_at=None if body.duration == "forever" else now + parse_duration(body.duration),
        request_id=body.request_id,
    )
    await grants.check_origin(grant)
    await grants.create(grant)
    return web.json_response(grant_json(grant), status=201, headers={"Location": f"/api/v1/grants/{grant.id}"})


async def revoke_grant(request: web.Request) -> web.Response:
    store = request.app[GRANTS]
    grant_id = request.match_info["id"]
    raw = await request.read()
    by = "api"
    if raw.strip():
        by = str(parse_body(RevokeIn, raw).by or "api")
    if await store.get(grant_id) is None:
        raise NotFound(f"no grant with id {grant_id!r}")
    await store.revoke(grant_id, by)
    grant = await store.get(grant_id)
    assert grant is not None
    return web.json_response(grant_json(grant))


class RevokeIn(_Strict):
    by: str | None = Field(default=None, max_length=40)


def add_routes(app: web.Application, grants: Grants, policy: PolicyHolder, clock: Clock) -> None:
    app[GRANTS], app[POLICY], app[CLOCK] = grants, policy, clock
    app.router.add_get("/api/v1/policy", get_policy)
    app.router.add_get("/api/v1/grants", list_grants)
    app.router.add_post("/api/v1/grants", create_grant)
    app.router.add_post("/api/v1/grants/{id}/revoke", revoke_grant)
