"""Execution receipts: tell Signoff what ran after an approval, so the card, the audit and the API show
it beside what was proposed and what was approved.

    decision = client.request_approval("refund", {"amount": 40}, summary="Refund 40")
    try:
        refund(**decision.params)
    except Exception as exc:
        client.report_outcome(decision.request_id, "failed", params=decision.params, error=str(exc))
        raise
    client.report_outcome(decision.request_id, "ran", params=decision.params, result="refund r_123")

`status`: ran | failed | skipped. `params`: the parameters actually used (the card flags any that differ
from the approved ones). `result`: short (at most 2,000 characters as JSON: `short` trims it). One
report per request (per batch item: `item`); the same report again answers as the first did (safe to
retry), a different one raises `SignoffRequestError` with `error_code` "outcome_already_reported".

`report_quietly` is what the adapters use after the action ran: a report that cannot be delivered is
logged, never raised (the action already happened; a lost receipt shows as "no outcome reported").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import httpx2
from pydantic_core import to_jsonable_python

from signoff._protocol import item_path
from signoff.errors import SignoffError

log = logging.getLogger("signoff")

Json = dict[str, Any]
RESULT_MAX = 2000  # what the server accepts, as JSON
RESULT_SHORT = 500  # what `short` keeps of a longer result
ERROR_MAX = 1000
STATUSES = ("ran", "failed", "skipped")


def short(value: Any) -> Any:
    """`value` as JSON if that is short, else its text cut to RESULT_SHORT characters."""
    try:
        plain = to_jsonable_python(value, fallback=repr)
        text = json.dumps(plain, ensure_ascii=False)
    except (TypeError, ValueError):
        plain, text = repr(value), repr(value)
    if len(text) <= RESULT_SHORT:
        return plain
    shown = plain if isinstance(plain, str) else text
    return shown[: RESULT_SHORT - 1] + "…"


def outcome_body(status: str, params: Mapping[str, Any] | None, result: Any, error: str | None,
                 item: str | None) -> Json:
    if status not in STATUSES:
        raise SignoffError(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
    body: Json = {"status": status}
    if params is not None:
        body["params"] = to_jsonable_python(dict(params), fallback=repr)
    if result is not None:
        body["result"] = short(result)
    if error:
        error = " ".join(str(error).split())
        body["error"] = error if len(error) <= ERROR_MAX else error[: ERROR_MAX - 1] + "…"
    if item is not None:
        body["item"] = item
    return body


def outcome_path(request_id: str) -> str:
    return item_path(request_id).replace("/questions/", "/approvals/") + "/outcome"


class OutcomeCalls:
    """`SignoffClient`'s receipt calls (it provides `_send`: retries, backoff, errors)."""

    def _send(self, method: str, path: str, *, json: Any = None, key: str | None = None,
              timeout: httpx2.Timeout | None = None, allow_conflict: bool = False) -> tuple[Json, int]:
        raise NotImplementedError

    def report_outcome(self, request_id: str, status: str, *, params: Mapping[str, Any] | None = None,
                       result: Any = None, error: str | None = None, item: str | None = None) -> Json:
        """Report what ran after the approval of `request_id`; the request's JSON as recorded."""
        body = outcome_body(status, params, result, error, item)
        return self._send("POST", outcome_path(request_id), json=body)[0]

    def report_quietly(self, request_id: str, status: str, **kw: Any) -> Json | None:
        """`report_outcome`, logging (not raising) a report that could not be made."""
        try:
            return self.report_outcome(request_id, status, **kw)
        except SignoffError as exc:
            log.warning("signoff: could not report the outcome of %s: %s", request_id, exc)
            return None


class AsyncOutcomeCalls:
    """`AsyncSignoffClient`'s receipt calls: `OutcomeCalls`, awaited."""

    async def _send(self, method: str, path: str, *, json: Any = None, key: str | None = None,
                    timeout: httpx2.Timeout | None = None, allow_conflict: bool = False) -> tuple[Json, int]:
        raise NotImplementedError

    async def report_outcome(self, request_id: str, status: str, *, params: Mapping[str, Any] | None = None,
                             result: Any = None, error: str | None = None, item: str | None = None) -> Json:
        """Report what ran after the approval of `request_id`; the request's JSON as recorded."""
        body = outcome_body(status, params, result, error, item)
        return (await self._send("POST", outcome_path(request_id), json=body))[0]

    async def report_quietly(self, request_id: str, status: str, **kw: Any) -> Json | None:
        """`report_outcome`, logging (not raising) a report that could not be made."""
        try:
            return await self.report_outcome(request_id, status, **kw)
        except SignoffError as exc:
            log.warning("signoff: could not report the outcome of %s: %s", request_id, exc)
            return None
