"""`POST /api/v1/policy/check`: what policy would do with some calls, before anyone is asked.

    {"actions": [{"name": "send_email", "params": {...}}, ...], "session": "...", "risk": "high",
     "requested_by": "...", "channel": "C0123"}
    -> {"policy": true, "items": [{"name": "send_email", "outcome": "allow" | "deny" | "ask",
                                   "tier": "high", "rule": "...", "grant_id": null, "reason": "..."}, ...]}

For agent frameworks that decide per call whether to stop for a person (Pydantic AI's deferred
tools, the OpenAI Agents SDK's `needs_approval`): a call policy allows need not interrupt the run,
a call policy denies must never run. Nothing is written and no card is posted: the answer is advice
to the agent's side, which then submits the call (`POST /api/v1/approvals`) and gets the same
verdict recorded (allowed and denied calls are decided at submit, without a card), or asks a person.

The bar is policy's and the token's, as at submit: the agent is the calling token; `risk` may only
raise the tier; `requested_by` is a label (it matches `requester:` rules as at submit). Without a
policy file every call asks. Bounded: at most `MAX_ITEMS` calls, each as large as a submit allows.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import Field

from bot.api import owners
from bot.api.routes import RATE, SERVICE, SETTINGS
from bot.api.schemas import ActionIn, _Strict, parse_body
from bot.approvals.gate import policy_gate
from bot.domain.batch import MAX_ITEMS
from bot.domain.grants import run_of
from bot.domain.model import Risk
from bot.domain.policy import Call

PATH = "/api/v1/policy/check"


class CheckIn(_Strict):
    actions: list[ActionIn] = Field(min_length=1, max_length=MAX_ITEMS)
    risk: Risk | None = None
    requested_by: str | None = Field(default=None, max_length=200)
    channel: str | None = Field(default=None, max_length=40)
    session: str | None = Field(default=None, min_length=1, max_length=200)


def _asks(name: str) -> dict[str, Any]:
    return {"name": name, "outcome": "ask", "tier": None, "rule": None, "grant_id": None,
            "reason": "no policy file is loaded: every call asks a person"}


async def check_policy(request: web.Request) -> web.Response:
    token = owners.token_of(request)
    request.app[RATE].take(token.name)  # as a submit: a flood of checks costs what a flood of submits does
    body: CheckIn = parse_body(CheckIn, await request.read())
    service = request.app[SERVICE]
    gate = policy_gate(service)
    if gate is None:
        return web.json_response({"policy": False, "items": [_asks(a.name) for a in body.actions]})
    extra = {**owners.stamp(request), **({"session": body.session} if body.session else {})}
    channel = body.channel or request.app[SETTINGS].default_channel
    now = service.clock.now()
    items = []
    for action in body.actions:
        call = Call(tool=action.name, params=action.params, requester=body.requested_by, channel=channel,
                    agent=token.name, run_id=run_of(extra), asked_risk=body.risk)
        evaluation = await gate.evaluate(call, now)
        assert evaluation is not None  # a gate with a policy loaded evaluates
        found = evaluation.to_json()
        items.append({"name": action.name, "outcome": found["outcome"], "tier": found["tier"], "rule": found["rule"],
                      "grant_id": found["grant_id"], "reason": found["reason"]})
    return web.json_response({"policy": True, "items": items})


def add_routes(app: web.Application) -> None:
    app.router.add_post(PATH, check_policy)
