"""MCP elicitations asked in Slack: `POST /api/v1/elicitations`, and Claude Code's `Elicitation` hook.

An MCP server's request for input (a form built from its `requested_schema`, or a URL to open)
becomes a Signoff question (bot.domain.elicitation): a card with Answer / Decline (Done / Decline
for a URL), stored like every request, owned by the calling token, in the channel and for the
people the caller's operator configured (the body's or the hook URL's `channel` / `approvers`,
else SIGNOFF_DEFAULT_CHANNEL). Policy never answers a question: a person does.

- `POST /api/v1/elicitations` (Idempotency-Key honoured) answers at once with the request
  (201 new, 200 the same key again) plus `elicitation`: null while pending, else
  {"action", "content"?}. Wait with `GET /api/v1/approvals/{id}?wait=N`; give up with
  `POST /api/v1/approvals/{id}/cancel` (the MCP server then gets `cancel`). signoff.elicitation
  drives this for an MCP client.
- The hook (`POST /api/v1/hooks/claude-code` with `hook_event_name: "Elicitation"`) waits up to
  `wait` seconds for the answer; if nobody answered, it cancels the question (the card says so)
  and answers `cancel`. A cancel that loses to a person's answer returns that answer.
- A command hook (its input carries `signoff_local`) also gets the signed question its answer was
  read from (`signoff`: {"request", "key"}): it passes an answer on to Claude Code only once that
  signature checks and the question is the one it asked (signoff.hook). Its `signoff_local.key`
  names the question when Claude Code gave no `elicitation_id`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from aiohttp import web
from pydantic import Field, field_validator

import signoff.claude_elicit as hook_rules
import signoff.claude_hook as rules
from bot.api import owners
from bot.api.routes import RATE, SERVICE, channel_or_default, idempotency_key, signed
from bot.api.schemas import Approvers, _Strict, body_hash, parse_body
from bot.api.timing_in import expand_groups
from bot.domain import elicitation
from bot.domain.json_codec import dumps
from bot.domain.model import Action, Kind, Request, Risk
from bot.domain.timing import Timing
from bot.domain.values import CHANNEL_ID
from bot.domain.wire import request_json
from bot.errors import InvalidInput
from bot.approvals.service import ApprovalSpec
from bot.slack.text import clip, one_line

PATH = "/api/v1/elicitations"


class ElicitationIn(_Strict):
    mode: Literal["form", "url"] = "form"
    message: str = Field(min_length=1, max_length=elicitation.MESSAGE_MAX)
    requested_schema: dict[str, Any] | None = None
    url: str | None = Field(default=None, max_length=elicitation.URL_MAX)
    elicitation_id: str | None = Field(default=None, max_length=200)
    server: str | None = Field(default=None, max_length=200)
    channel: str | None = None
    approvers: Approvers = Field(default_factory=list)
    requested_by: str | None = Field(default=None, max_length=200)

    @field_validator("channel")
    @classmethod
    def _channel_id(cls, value: str | None) -> str | None:
        if value is not None and not CHANNEL_ID.match(value):
            raise ValueError(f"{value[:40]!r} is not a Slack channel id (like C0123ABCD)")
        return value


def elicitation_json(request: web.Request, found: Request) -> dict[str, Any]:
    """The request's signed JSON plus what the MCP server gets (`elicitation`: null while pending)."""
    body = signed(request, request_json(found))
    decision = found.decision
    body["elicitation"] = elicitation.result_of(found.status.value, decision.params if decision else None)
    return body


async def ask(request: web.Request, body: ElicitationIn, key: str | None, hashed: str | None) -> tuple[Request, bool]:
    """Store the question for the calling token: (request, created). InvalidInput naming what cannot be asked."""
    service = request.app[SERVICE]
    try:
        params = elicitation.params(mode=body.mode, message=body.message, schema=body.requested_schema, url=body.url,
                                    elicitation_id=body.elicitation_id, server=body.server)
    except elicitation.SchemaProblem as exc:
        field = str(exc).split(":")[0].split(" ")[0]
        raise InvalidInput(f"this elicitation cannot be asked: {exc}", details=[{"field": field, "message": str(exc)}]) from None
    channel = channel_or_default(request, body.channel)
    members = await expand_groups(service.directory, body.approvers, Timing(), escalation_given=True)
    spec = ApprovalSpec(
        action=Action(elicitation.ELICITATION, params), summary=clip(one_line(body.message), 300), risk=Risk.LOW,
        channel=channel, approvers=tuple(dict.fromkeys(body.approvers)), approver_users=members,
        requested_by=body.requested_by, extra=owners.stamp(request), kind=Kind.QUESTION,
    )
    return await service.submit(spec, idempotency_key=owners.scoped_key(request, key), body_hash=hashed)


async def create_elicitation(request: web.Request) -> web.Response:
    request.app[RATE].take(owners.token_of(request).name)
    body: ElicitationIn = parse_body(ElicitationIn, await request.read())
    found, created = await ask(request, body, idempotency_key(request), body_hash(body))
    response = web.json_response(elicitation_json(request, found), status=201 if created else 200, dumps=dumps)
    response.headers["Location"] = f"/api/v1/approvals/{found.id}"
    return response


async def hook(request: web.Request, data: dict[str, Any], options: rules.Options, *,
               wait: Callable[[web.Request, str, float], Awaitable[Request]]) -> dict[str, Any]:
    """Claude Code's Elicitation hook: ask, `wait` up to `options.wait` (the hook endpoint's long-poll,
    counted against its caps), answer (cancel if nobody did)."""
    request.app[RATE].take(owners.token_of(request).name)
    asked = hook_rules.parse(data)
    local = data.get(rules.LOCAL)
    command_hook = isinstance(local, dict)
    key = hook_rules.key(asked, hook_rules.local_key(local))
    body = ElicitationIn(mode=asked.mode, message=asked.message[:elicitation.MESSAGE_MAX],  # type: ignore[arg-type]
                         requested_schema=asked.requested_schema, url=asked.url,
                         elicitation_id=asked.elicitation_id, server=asked.server,
                         channel=options.channel, approvers=list(options.approvers),
                         requested_by=f"Claude Code session {asked.session_id}"[:200])
    found, _ = await ask(request, body, key, body_hash(body))
    if found.is_pending and options.wait > 0:
        found = await wait(request, found.id, options.wait)
    why = None
    if found.is_pending:  # nobody answered in time: close the card; a person who answered meanwhile wins
        found = (await request.app[SERVICE].cancel(
            found.id, reason=f"nobody answered within {options.wait:g}s")).request
        why = f"nobody answered {found.id} in Slack within {options.wait:g}s"
    result = elicitation.result_of(found.status.value, found.decision.params if found.decision else None)
    assert result is not None
    if result["action"] == "cancel" and why is None:
        why = f"{found.id} was {found.status.value} before anyone answered"
    answered = hook_rules.answer(result["action"], result.get("content"), why)
    if command_hook:  # the command hook checks the answer against the signed question before passing it on
        answered[rules.REPLY] = {"request": signed(request, request_json(found)), "key": key}
    return answered


def add_routes(app: web.Application) -> None:
    app.router.add_post(PATH, create_elicitation)
