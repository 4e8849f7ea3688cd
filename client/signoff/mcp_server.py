"""Signoff as MCP tools: `request_approval`, `ask_human` and `permission_prompt`.

    signoff mcp                      stdio, for any MCP host (Claude Code: `--mcp-config`)
    POST/GET {server}/mcp            the same tools over streamable HTTP on the main server (bearer token)

`permission_prompt` follows Claude Code's `--permission-prompt-tool` contract: input `tool_name`,
`input`, `tool_use_id` (newer CLIs; also found in `_meta` as `claudecode/toolUseId`), answer one text
block holding `{"behavior": "allow", "updatedInput": {...}}` or `{"behavior": "deny", "message": ...}`.
The model is offered it as an ordinary tool too, so a call is a request to ask, never a grant: every
call asks a person, and every error is a deny.

The tools reach the server through `AsyncSignoffClient`s made by a factory per call (stdio: from
SIGNOFF_URL / SIGNOFF_TOKEN; HTTP: the main server itself, with the caller's bearer token). Nothing
in `signoff/__init__` imports this module, so `mcp` is needed only by those who use it.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

import signoff.claude_tools as claude_tools
from signoff.client import AsyncSignoffClient
from signoff.errors import SignoffError, UndeliverableError
from signoff.models import Answers, Decision

ClientFactory = Callable[[Any], AsyncSignoffClient]


RISKS = ("low", "medium", "high", "critical")


@dataclass(frozen=True)
class Defaults:
    """Where cards go and how long a permission prompt waits, when a call does not say.

    `risk` and `approvers` are the operator's bar (`--risk`/`--approvers`, SIGNOFF_APPROVERS, the
    `/mcp?risk=&approvers=` URL): the model's arguments may raise the risk, never lower it, and
    name approvers only when the operator named none (`bar`). The same for `channel` (where the card
    goes picks who sees and decides it): the model's counts only where the operator named none.
    """

    channel: str | None = None
    approvers: tuple[str, ...] = ()
    risk: str | None = None
    prompt_wait: float | None = None  # None: until decided (or the server's own timeout)
    # Diff a permission prompt's Write/Edit against the file on this machine: only `signoff mcp` over
    # stdio, beside the agent. Off by default: in the server (/mcp) the path would name the server's file.
    read_files: bool = False
    requested_by: str = field(default_factory=lambda: f"MCP client on {socket.gethostname()}")

    @classmethod
    def from_env(cls) -> Defaults:
        approvers = os.environ.get("SIGNOFF_APPROVERS", "")
        return cls(channel=os.environ.get("SIGNOFF_CHANNEL") or None,
                   approvers=tuple(a.strip() for a in approvers.split(",") if a.strip()))


def bar(chosen: Defaults, risk: str | None, approvers: list[str] | None) -> tuple[str | None, list[str]]:
    """(risk, approvers) for a call: the higher of the operator's risk and the model's (an unknown word
    is sent as given, for the server to refuse; None when neither named one: policy's tier holds), and
    the operator's approvers when it named any."""
    floor = chosen.risk if chosen.risk in RISKS else None
    asked = risk or floor
    if floor is not None and asked in RISKS and RISKS.index(asked) < RISKS.index(floor):
        asked = floor
    return asked, list(chosen.approvers) or list(approvers or [])


class Option(BaseModel):
    label: str = Field(description="the option's text (also what comes back as the answer)")
    description: str | None = Field(default=None, description="one line under the label")


class Question(BaseModel):
    question: str = Field(description="the full question")
    header: str | None = Field(default=None, description="a short label for it (a few words)")
    options: list[Option] = Field(min_length=2, max_length=4)
    multi_select: bool = Field(default=False, description="whether several options may be chosen")


def decision_json(decision: Decision) -> dict[str, Any]:
    return {"request_id": decision.request_id, "approved": decision.approved, **decision.raw,
            "outcome": decision.outcome, "params": decision.params}


def answers_json(answers: Answers) -> dict[str, Any]:
    who = answers.decided_by
    return {"request_id": answers.request_id, "outcome": "answered",
            "answers": [{"question": a.question, "selected": list(a.selected), "text": a.text} for a in answers.answers],
            "answered_by": {"id": who.id, "name": who.name} if who else None, "via": answers.via}


def prompt_answer(decision: Decision) -> dict[str, Any]:
    """Claude Code's permission-prompt answer for a decision."""
    if decision.approved:
        return {"behavior": "allow", "updatedInput": decision.params}
    who = decision.decider
    by = f"by Signoff's {decision.via}" if decision.via in ("policy", "grant") or not who else f"in Slack by {who}"
    if decision.outcome == "rejected":
        because = f": {decision.comment}" if decision.comment else " (no reason given)"
        return {"behavior": "deny", "message": f"Rejected {by}{because}"}
    return {"behavior": "deny", "message": f"Signoff: the request was {decision.outcome}"
                                           f"{': ' + decision.comment if decision.comment else ''}"}


async def _settle(client: AsyncSignoffClient, request_id: str, first: Decision | None,
                  timeout: float | None) -> Decision:
    """The request's final decision; when `timeout` runs out, it is cancelled (or whoever won that race).

    A card Slack refused for good raises `UndeliverableError` (the tool's error result names the cause
    and the fix) once the request is cancelled: nobody could see it, and nobody should approve it later."""
    try:
        found = first or await client.decision(request_id, timeout)
    except UndeliverableError as exc:
        ended = await client.cancel(request_id, exc.cancel_reason)
        if ended.outcome != "cancelled":
            return ended  # someone decided it first (from the App Home): that decision stands
        raise exc.cancelled() from None
    return found if found is not None else await client.cancel(request_id, f"no decision within {timeout:g}s")


def build_server(client_factory: ClientFactory | None = None,
                 defaults: Defaults | Callable[[Any], Defaults] | None = None) -> MCPServer:
    """The MCPServer with Signoff's three tools. `defaults` may depend on the call (its `Context`)."""
    given = defaults or Defaults()
    defaults_for: Callable[[Any], Defaults] = given if callable(given) else (lambda ctx: given)
    factory: ClientFactory = client_factory or (lambda ctx: AsyncSignoffClient())
    server = MCPServer("signoff", instructions=(
        "Ask a person in Slack before risky actions (request_approval) and ask them questions (ask_human). "
        "Run an action only with the params of an approved decision: the person may have edited them."))

    @server.tool(annotations=ToolAnnotations(title="Ask a person to approve an action", read_only_hint=False,
                                             destructive_hint=False, idempotent_hint=False, open_world_hint=True))
    async def request_approval(action: str, params: dict[str, Any], summary: str,
                               preview: dict[str, Any] | None = None, risk: str | None = None,
                               params_schema: dict[str, Any] | None = None, context: str | None = None,
                               channel: str | None = None, approvers: list[str] | None = None,
                               timeout_seconds: float | None = None, idempotency_key: str | None = None,
                               ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Post an approval card in Slack and wait for a person's decision.

        Returns the decision: `approved`, `outcome` (approved | rejected | expired | cancelled), `params`
        (run the action with these: the person may have edited them), `changes`, `comment` (the reason
        for a rejection) and `decided_by`. `preview` is one of {"kind": "email"|"diff"|"table"|"markdown"|
        "json", ...}. With `timeout_seconds`, an undecided request is cancelled and reported as such.
        `risk` can raise the configured risk, never lower it; `approvers` count only where none are configured.
        """
        chosen = defaults_for(ctx)
        risk, approvers = bar(chosen, risk, approvers)
        async with factory(ctx) as client:
            try:
                handle = await client.submit(
                    action, params, summary=summary, preview=preview, risk=risk,
                    params_schema=params_schema, channel=chosen.channel or channel,
                    approvers=approvers, idempotency_key=idempotency_key,
                    context=context, requested_by=chosen.requested_by)
                return decision_json(await _settle(client, handle.id, handle.decision, timeout_seconds))
            except SignoffError as exc:
                raise _said(exc) from exc

    @server.tool(annotations=ToolAnnotations(title="Ask people questions in Slack", read_only_hint=False,
                                             destructive_hint=False, idempotent_hint=False, open_world_hint=True))
    async def ask_human(questions: list[Question], summary: str | None = None, context: str | None = None,
                        channel: str | None = None, approvers: list[str] | None = None,
                        timeout_seconds: float | None = None, idempotency_key: str | None = None,
                        ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Ask 1-4 multiple-choice questions (2-4 options each) in Slack; people answer with buttons or
        by replying in the thread (free text). Returns each question's selected labels and/or text."""
        chosen = defaults_for(ctx)
        async with factory(ctx) as client:
            try:
                answers = await client.ask([q.model_dump() for q in questions], summary=summary, context=context,
                                           channel=chosen.channel or channel,
                                           approvers=bar(chosen, None, approvers)[1], timeout=timeout_seconds,
                                           idempotency_key=idempotency_key, requested_by=chosen.requested_by)
            except SignoffError as exc:
                decision = getattr(exc, "decision", None)
                if decision is None:
                    raise _said(exc) from exc
                return {"request_id": decision.request_id, "outcome": decision.outcome, "answers": None,
                        "comment": decision.comment}
            return answers_json(answers)

    @server.tool(structured_output=False,
                 annotations=ToolAnnotations(title="Claude Code permission prompt, answered in Slack",
                                             read_only_hint=False, destructive_hint=False, open_world_hint=True))
    async def permission_prompt(tool_name: str, input: dict[str, Any], tool_use_id: str | None = None,
                                ctx: Context = None) -> str:  # type: ignore[assignment]
        """Claude Code's --permission-prompt-tool: asks a person in Slack whether the tool call may run.
        Answers {"behavior": "allow", "updatedInput": {...}} or {"behavior": "deny", "message": "..."}."""
        try:
            chosen = defaults_for(ctx)
            call_id = tool_use_id or _meta_tool_use_id(ctx)
            async with factory(ctx) as client:
                handle = await client.submit(
                    tool_name, input, summary=claude_tools.summary(tool_name, input),
                    preview=claude_tools.preview(tool_name, input, read_files=chosen.read_files),
                    params_schema=claude_tools.input_schema(tool_name, input), risk=chosen.risk,
                    channel=chosen.channel, approvers=list(chosen.approvers),
                    idempotency_key=f"claude-code-prompt:{call_id}" if call_id else None,
                    context="Claude Code asked through its permission prompt tool.",
                    requested_by=chosen.requested_by)
                decision = await _settle(client, handle.id, handle.decision, chosen.prompt_wait)
            answer = prompt_answer(decision)
        except Exception as exc:  # noqa: BLE001 - fail closed: no answer from Signoff is a deny
            detail = getattr(exc, "message", None) or str(exc)
            answer = {"behavior": "deny", "message": f"Signoff: could not get a decision ({type(exc).__name__}: "
                                                     f"{detail[:300]})"}
        return json.dumps(answer)

    return server


def _said(exc: SignoffError) -> ToolError:
    """The tool's error result, naming what went wrong (the server keeps any other exception's text to
    itself and tells the model only "Error executing tool")."""
    return ToolError(f"{type(exc).__name__}: {exc.message}")


def _meta_tool_use_id(ctx: Any) -> str | None:
    meta = getattr(getattr(ctx, "request_context", None), "meta", None)
    if meta is None:
        return None
    data = meta if isinstance(meta, dict) else getattr(meta, "model_extra", None) or {}
    value = data.get("claudecode/toolUseId")
    return str(value) if value else None


def run_stdio(argv: list[str]) -> int:
    """`signoff mcp`: serve the tools on stdin/stdout until the host closes them."""
    import argparse

    parser = argparse.ArgumentParser(prog="signoff mcp", description="Signoff's MCP server over stdio.")
    parser.add_argument("--channel", default=os.environ.get("SIGNOFF_CHANNEL") or None)
    parser.add_argument("--approvers", default=os.environ.get("SIGNOFF_APPROVERS", ""))
    parser.add_argument("--risk", choices=["low", "medium", "high", "critical"], default=None,
                        help="ask for at least this risk (default: the policy's tier for the tool; high without a policy file)")
    parser.add_argument("--prompt-wait", type=float, default=None,
                        help="seconds a permission prompt waits before it is denied (default: until decided)")
    parser.add_argument("--retry-for", type=float, default=10.0,
                        help="seconds of network errors before a call gives up (a permission prompt then denies)")
    args = parser.parse_args(argv)
    import logging

    # The MCP SDK logs at INFO to the host's stderr; httpx would add a line for every request Signoff is sent.
    for noisy in ("httpx", "httpx2"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    approvers = tuple(a.strip() for a in args.approvers.split(",") if a.strip())
    server = build_server(lambda ctx: AsyncSignoffClient(retry_for=args.retry_for),
                          Defaults(channel=args.channel, approvers=approvers, risk=args.risk,
                                   prompt_wait=args.prompt_wait, read_files=True))
    server.run("stdio")
    return 0
