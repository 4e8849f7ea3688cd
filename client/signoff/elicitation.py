"""MCP elicitation answered in Slack: an `elicitation_callback` for `mcp.ClientSession` / `mcp.Client`.

    from signoff.elicitation import elicitation_callback

    async with ClientSession(read, write, elicitation_callback=elicitation_callback(timeout=300)) as session:
        ...

When the MCP server asks for input (`elicitation/create`, or an `InputRequiredResult` under the
2026-07-28 protocol: the `mcp` package hands both to the same callback), Signoff posts it as a
question in Slack (POST /api/v1/elicitations), built from the server's `requested_schema`; the
callback returns what a person did:
- submitted the form (or clicked Done on a URL) -> `ElicitResult(action="accept", content=...)`,
  the content typed and checked against the schema by the server;
- clicked Decline -> `decline`;
- nobody answered within `timeout` seconds -> the question is cancelled in Slack and the callback
  returns `cancel` (a person who answered in the meantime wins: their answer is returned).

Fails closed: when Signoff cannot be reached, or refuses the schema, the callback returns
`ErrorData` naming why (the MCP server sees an error, never an accept). The answer is read only
from a decision whose signature checks (signoff.signatures, as for every decision): an answer that
was altered on its way, unsigned, or another question's is an `ErrorData` saying so, and nothing
of it reaches the MCP server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import signoff._protocol as p
from signoff.client import AsyncSignoffClient
from signoff.errors import SignatureInvalid, SignoffError, UndeliverableError
from signoff.models import Decision

if TYPE_CHECKING:
    import mcp_types
    from mcp.client.session import ElicitationFnT

DEFAULT_TIMEOUT = 600.0
INVALID_REQUEST = -32600
INTERNAL_ERROR = -32603


def body_of(params: Any, *, server: str | None = None, channel: str | None = None,
            approvers: Sequence[str] = (), requested_by: str | None = None) -> dict[str, Any]:
    """The `POST /api/v1/elicitations` body for an MCP `ElicitRequestParams` (form or URL mode)."""
    mode = getattr(params, "mode", None) or "form"
    body: dict[str, Any] = {"mode": mode, "message": params.message}
    if mode == "url":
        body["url"] = params.url
        if getattr(params, "elicitation_id", None):
            body["elicitation_id"] = params.elicitation_id
    else:
        body["requested_schema"] = params.requested_schema
    for name, value in (("server", server), ("channel", channel), ("requested_by", requested_by)):
        if value:
            body[name] = value
    if approvers:
        body["approvers"] = list(approvers)
    return body


def result_of(decision: Decision) -> dict[str, Any]:
    """{"action", "content"?} from how the question ended (outcome answered / rejected / expired / cancelled)."""
    if decision.outcome == "answered":
        content = decision.params.get("content")
        return {"action": "accept", "content": content} if isinstance(content, dict) else {"action": "accept"}
    return {"action": "decline"} if decision.outcome == "rejected" else {"action": "cancel"}


async def ask(client: AsyncSignoffClient, body: dict[str, Any], *, timeout: float) -> dict[str, Any]:
    """Ask in Slack and wait up to `timeout` seconds: {"action", "content"?}; cancelled in Slack if nobody answered."""
    created, _ = await client._send("POST", "/api/v1/elicitations", json=body, key=p.new_key())
    request_id = str(created["id"])
    try:
        found = await client.decision(request_id, timeout)  # signature-checked, or None when time ran out
    except UndeliverableError as exc:
        found = await client.cancel(request_id, exc.cancel_reason)
    if found is None:
        found = await client.cancel(request_id, f"nobody answered within {timeout:g}s")
    return result_of(found)


def elicitation_callback(client: AsyncSignoffClient | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                         channel: str | None = None, approvers: Sequence[str] = (), server: str | None = None,
                         requested_by: str | None = None) -> ElicitationFnT:
    """An `elicitation_callback` that asks in Slack. `client`: an AsyncSignoffClient (default: one from
    SIGNOFF_URL / SIGNOFF_TOKEN, made on first use); `server`: the MCP server's name, shown on the card."""
    import mcp_types

    made: list[AsyncSignoffClient] = []

    async def callback(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        if client is None and not made:
            made.append(AsyncSignoffClient())
        signoff = client or made[0]
        body = body_of(params, server=server, channel=channel, approvers=approvers, requested_by=requested_by)
        try:
            answer = await ask(signoff, body, timeout=timeout)
        except SignatureInvalid as exc:
            return mcp_types.ErrorData(code=INTERNAL_ERROR, message=f"Signoff's answer failed its check, so it is "
                                                                    f"not passed on: {exc}")
        except SignoffError as exc:
            code = INVALID_REQUEST if getattr(exc, "status", None) == 400 else INTERNAL_ERROR
            return mcp_types.ErrorData(code=code, message=f"Signoff could not ask in Slack: {exc}")
        return mcp_types.ElicitResult(action=answer["action"], content=answer.get("content"))

    return callback
