"""What the sync and async clients share: configuration, request bodies, reading answers.

No I/O here; `client.py` does the calls, `_pace.py` says how fast. Kept apart so the two clients
cannot drift.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx2

from signoff.errors import SignoffError, SignoffRequestError, UndeliverableError

MAX_LONG_POLL = 50.0  # the server allows up to 60 s per long-poll; stay under it
DEFAULT_RETRY_FOR = 60.0
CONNECT_TIMEOUT = 10.0
READ_MARGIN = 15.0  # a long-poll's read timeout: its wait plus this


@dataclass(frozen=True)
class Config:
    """Where the server is and how long to keep trying. `retry_for`: seconds of failures before giving up."""

    url: str
    token: str | None
    retry_for: float = DEFAULT_RETRY_FOR

    @classmethod
    def resolve(cls, url: str | None, token: str | None, retry_for: float | None,
                environ: Mapping[str, str] | None = None) -> Config:
        env = os.environ if environ is None else environ
        chosen = (url or env.get("SIGNOFF_URL") or "").strip().rstrip("/")
        if not chosen:
            raise SignoffError("no Signoff server: pass url= or set SIGNOFF_URL (like http://127.0.0.1:3000)")
        if not chosen.startswith(("http://", "https://")):
            raise SignoffError(f"SIGNOFF_URL must start with http:// or https://, not {chosen[:40]!r}")
        return cls(chosen, token or env.get("SIGNOFF_TOKEN") or None,
                   DEFAULT_RETRY_FOR if retry_for is None else retry_for)

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "signoff-python"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers


def new_key() -> str:
    return f"signoff-{uuid.uuid4().hex}"


def approval_body(action: str, params: Mapping[str, Any], *, summary: str, preview: Mapping[str, Any] | None,
                  risk: str | None, params_schema: Mapping[str, Any] | None, channel: str | None,
                  approvers: Sequence[str] | None, context: str | None, requested_by: str | None,
                  timing: Mapping[str, Any] | None,
                  allowed_decisions: Sequence[str] | None = None,
                  suggestions: Sequence[Mapping[str, Any]] | None = None,
                  session: str | None = None, callback_url: str | None = None,
                  state: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"action": {"name": action, "params": dict(params)}, "summary": summary}
    if risk is not None:  # unset: policy's tier for the tool (high without a policy file); a risk only raises it
        body["risk"] = risk
    if state is not None:  # what the preview was computed from: the decision carries it back to re-check
        body["state"] = state
    if callback_url is not None:  # the decision is POSTed there, signed (signoff.webhooks reads it)
        body["callback_url"] = callback_url
    if suggestions:  # Claude's permission updates, offered on the card ("Approve & always allow ...")
        body["suggestions"] = [dict(s) for s in suggestions]
    if session is not None:  # the agent's run/session: what a session-scoped grant is bound to
        body["session"] = session
    if allowed_decisions is not None:  # approve | edit | reject | respond; unset: the first three
        body["allowed_decisions"] = list(allowed_decisions)
    if params_schema is not None:
        body["action"]["params_schema"] = dict(params_schema)
    optional = {"preview": dict(preview) if preview is not None else None, "channel": channel,
                "approvers": list(approvers) if approvers else None, "context": context,
                "requested_by": requested_by, "callback_url": callback_url}
    body.update({k: v for k, v in optional.items() if v is not None})
    for key, value in (timing or {}).items():
        if key not in ("reminders", "escalation", "timeout"):
            raise SignoffError(f"timing takes reminders, escalation and timeout, not {key!r}")
        body[key] = value
    return body


def batch_body(items: Sequence[Mapping[str, Any]], *, summary: str, risk: str | None, channel: str | None,
               approvers: Sequence[str] | None, context: str | None, requested_by: str | None,
               timing: Mapping[str, Any] | None, callback_url: str | None = None,
               session: str | None = None) -> dict[str, Any]:
    """A batch: `items` of {name, params, params_schema?, preview?, allowed_decisions?, key?}, one card for all
    (`key`: the agent's id for the action, which its execution receipt names as `item`)."""
    shaped = []
    for item in items:
        unknown = set(item) - {"name", "params", "params_schema", "preview", "allowed_decisions", "key"}
        if unknown:
            raise SignoffError(f"a batch item takes name, params, params_schema, preview, allowed_decisions and key, "
                               f"not {', '.join(sorted(unknown))}")
        shaped.append({k: v if k in ("name", "key") else list(v) if k == "allowed_decisions" else dict(v)
                       for k, v in item.items() if v is not None})
    body = approval_body("batch", {}, summary=summary, preview=None, risk=risk, params_schema=None, channel=channel,
                         approvers=approvers, context=context, requested_by=requested_by, timing=timing,
                         callback_url=callback_url, session=session)
    del body["action"]
    body["items"] = shaped
    return body


def question_body(questions: Sequence[Mapping[str, Any] | str], *, summary: str | None, context: str | None,
                  channel: str | None, approvers: Sequence[str] | None,
                  requested_by: str | None, callback_url: str | None = None) -> dict[str, Any]:
    """Questions as the server takes them. Accepts option strings and Claude's `multiSelect` spelling."""
    shaped = []
    for q in questions:
        if isinstance(q, str):
            raise SignoffError("each question is a mapping with `question` and `options`")
        options = [{"label": o} if isinstance(o, str) else
                   {k: v for k, v in o.items() if k in ("label", "description") and v is not None}
                   for o in q.get("options") or []]
        item: dict[str, Any] = {"question": q.get("question"), "options": options,
                                "multi_select": bool(q.get("multi_select", q.get("multiSelect", False)))}
        if q.get("header"):
            item["header"] = q["header"]
        shaped.append(item)
    body: dict[str, Any] = {"questions": shaped}
    optional = {"summary": summary, "context": context, "channel": channel,
                "approvers": list(approvers) if approvers else None, "requested_by": requested_by,
                "callback_url": callback_url}
    body.update({k: v for k, v in optional.items() if v is not None})
    return body


def item_path(request_id: str) -> str:
    """Questions and approvals live under different routes; their ids say which."""
    kind = "questions" if request_id.startswith("qst_") else "approvals"
    return f"/api/v1/{kind}/{request_id}"


def retryable(response: httpx2.Response) -> bool:
    return response.status_code == 429 or response.status_code >= 500


# Slack refused the channel itself: asking again with a channel the bot is in is the fix.
CHANNEL_ERRORS = frozenset({"channel_not_found", "not_in_channel", "is_archived"})


def undeliverable(body: Mapping[str, Any]) -> UndeliverableError | None:
    """The error for a pending request whose card Slack refused for good (`delivery.status` `failed`),
    else None. Nobody can see such a request: a wait on it would wait for nothing."""
    delivery = body.get("delivery")
    if body.get("status") != "pending" or not isinstance(delivery, dict) or delivery.get("status") != "failed":
        return None
    request_id = str(body.get("id"))
    reason = str(delivery.get("error") or "refused")
    channel = delivery.get("channel") or body.get("channel")
    why = str(delivery.get("message") or f"Slack answered {delivery.get('method') or 'the post'} with {reason}")
    fix = (" Ask again with a channel the bot is in (`channel=`, `--channel` or SIGNOFF_CHANNEL)."
           if reason in CHANNEL_ERRORS else "")
    what = "question" if body.get("kind") == "question" else "approval"
    message = (f"the {what} card for {request_id} could not be posted in Slack ({reason}): {why}. Nobody can "
               f"see the request, so it is not approved.{fix}")
    return UndeliverableError(message, request_id=request_id, reason=reason,
                              channel=str(channel) if channel else None, delivery=dict(delivery))


def read_json(response: httpx2.Response, *, allow_conflict: bool = False) -> dict[str, Any]:
    """The body of a 2xx (or, when allowed, a 409 that carries the request); a 4xx raises with the server's words."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.is_success and isinstance(body, dict):
        return body
    if allow_conflict and response.status_code == 409 and isinstance(body, dict) and "request" in body:
        return body
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        raise SignoffRequestError(f"HTTP {response.status_code}: {error.get('message')}",
                                  status=response.status_code, error_code=error.get("code"),
                                  details=error.get("details"))
    raise SignoffRequestError(f"HTTP {response.status_code}: {response.text[:300]}", status=response.status_code)


def wait_timeout(wait: float) -> httpx2.Timeout:
    return httpx2.Timeout(CONNECT_TIMEOUT, read=wait + READ_MARGIN)
