"""Ask the policy about a call without making a request: what would happen if the agent submitted it.

    POST /api/v1/policy/check   {"action": {"name", "params"}, "risk"?, "channel"?, "requested_by"?, "session"?}
                                200 {"outcome": "allow" | "deny" | "ask", "tier", "rule", "grant_id", "reason",
                                     "via", "fyi", "policy": true | false}

For agent frameworks that decide per tool call whether to pause at all (the OpenAI Agents SDK's
`needs_approval`): an allowed call runs without a card, a denied one never runs, and only an `ask`
pauses the run and posts a card. Nothing is written: no request, no audit row, no grant used up.

The verdict is the one submit would reach: the same `Call` (the token names the agent; `session` is
the token's own run scope; the body's `risk` may only raise the tier) under the loaded policy and the
live grants. Without a policy file the answer is always `ask` (`"policy": false`), as every submit
asks then. The cost is bounded as submit's is (the body's size and depth limits, re2 matching, the
tool's cached grant index) and each check is counted against the token's own bucket before the body
is read: a token that floods checks is answered 429 and costs nothing else.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import Field, field_validator

from bot.api import owners
from bot.api.rate import SubmitRate
from bot.api.routes import SERVICE, SETTINGS
from bot.api.schemas import ActionIn, _Strict, parse_body
from bot.approvals.gate import policy_gate
from bot.domain.grants import agent_of, run_of
from bot.domain.model import Risk
from bot.domain.policy import Call
from bot.domain.values import CHANNEL_ID

PATH = "/api/v1/policy/check"
CHECK_RATE = web.AppKey("policy_check_rate", SubmitRate)
NO_POLICY = "no policy file is loaded: every request asks a person"


class CheckIn(_Strict):
    action: ActionIn
    risk: Risk | None = None  # the agent's own: it may only raise the tier policy gives
    channel: str | None = None
    requested_by: str | None = Field(default=None, max_length=200)
    session: str | None = Field(default=None, min_length=1, max_length=200)

    @field_validator("channel")
    @classmethod
    def _channel_id(cls, value: str | None) -> str | None:
        if value is not None and not CHANNEL_ID.match(value):
            raise ValueError(f"{value[:40]!r} is not a Slack channel id (like C0123ABCD)")
        return value


async def check_policy(request: web.Request) -> web.Response:
    token = owners.token_of(request)
    request.app[CHECK_RATE].take(token.name)  # before reading the body: a flood costs nothing
    body: CheckIn = parse_body(CheckIn, await request.read())
    service = request.app[SERVICE]
    gate = policy_gate(service)
    if gate is None:
        return web.json_response({"outcome": "ask", "tier": (body.risk or Risk.HIGH).value, "rule": None,
                                  "grant_id": None, "reason": NO_POLICY, "via": None, "fyi": False, "policy": False})
    extra: dict[str, Any] = {**owners.stamp(request), **({"session": body.session} if body.session else {})}
    call = Call(tool=body.action.name, params=body.action.params, asked_risk=body.risk,
                requester=body.requested_by, channel=body.channel or request.app[SETTINGS].default_channel,
                run_id=run_of(extra), agent=agent_of(extra))
    evaluation = await gate.evaluate(call, service.clock.now())
    assert evaluation is not None  # policy_gate answered only because a policy is loaded
    return web.json_response({**evaluation.to_json(), "policy": True})


def add_routes(app: web.Application, rate: SubmitRate) -> None:
    app[CHECK_RATE] = rate
    app.router.add_post(PATH, check_policy)
