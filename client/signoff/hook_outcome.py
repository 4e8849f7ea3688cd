"""`signoff hook claude-code` as a PostToolUse (or PostToolUseFailure) hook: the execution receipt.

After Claude Code ran a tool call that Signoff approved, the hook reports what ran to the request
(`POST /api/v1/approvals/{id}/outcome`): `ran` with the input the tool actually ran with (the card
says whether it was the approved one) and a short result, or `failed` with the error. It finds the
request by the key the PreToolUse hook submitted it under (session + tool_use_id); a call asked
again because the file changed after an approval (`hook_state`) is found along that chain.

Invariants: the call already ran, so nothing here can stop it: the hook prints `{}`, exits 0, and a
report that cannot be made is only logged. A call Signoff never saw (no request under its key) is
left alone; a call without a `tool_use_id` cannot be matched and is not reported.
"""

from __future__ import annotations

import logging
from typing import Any

from signoff.client import SignoffClient
from signoff.hook_state import chain_keys

log = logging.getLogger("signoff")

POST = "PostToolUse"
POST_FAILURE = "PostToolUseFailure"
EVENTS = (POST, POST_FAILURE)
_KEPT = 200  # a tool response's short string fields kept in the result (not a file's whole content)


def result_of(response: Any) -> Any:
    """A short result from a tool's response: its small scalar fields (a Write's whole content is not
    repeated: the card's preview showed it), or its text cut short."""
    if isinstance(response, dict):
        kept = {k: v for k, v in response.items()
                if isinstance(v, (bool, int, float)) or (isinstance(v, str) and len(v) <= _KEPT)}
        return kept or None
    return response


def report(client: SignoffClient, base_key: str, tool_input: dict[str, Any], *, failed: bool, response: Any,
           error: str | None) -> str | None:
    """Report the outcome on the request that let the call run; its id, or None when there is none."""
    for key in chain_keys(base_key):
        found = client.find(key)
        if found is None:
            return None
        if found.get("outcome_status") == "skipped":  # approved on a state that changed: asked again
            continue
        if found.get("status") != "approved":
            return None
        request_id = str(found["id"])
        if failed:
            client.report_quietly(request_id, "failed", params=tool_input, error=error or "the tool call failed")
        else:
            client.report_quietly(request_id, "ran", params=tool_input, result=result_of(response))
        return request_id
    return None
