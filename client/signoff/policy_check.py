"""Ask Signoff's policy about a call without making a request (`POST /api/v1/policy/check`).

    verdict = client.check_policy("send_email", {"to": "a@example.com"})
    if verdict.allowed: ...          # runs with no card
    elif verdict.denied: ...         # never runs: verdict.reason says which rule
    else: ...                        # a person decides: submit it

For frameworks that decide per call whether to pause (the OpenAI Agents SDK's `needs_approval`).
Nothing is written on the server; the verdict is the one a submit of the same call would reach then.
The agent is its token; `risk` may only raise the tier policy gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx2

Json = dict[str, Any]
PATH = "/api/v1/policy/check"


@dataclass(frozen=True)
class Verdict:
    """What policy says of a call: `outcome` allow | deny | ask, its tier, the rule or grant, and why."""

    outcome: str
    tier: str | None = None
    rule: str | None = None
    grant_id: str | None = None
    reason: str | None = None
    policy: bool = True  # False: the server has no policy file (every call asks)
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def allowed(self) -> bool:
        return self.outcome == "allow"

    @property
    def denied(self) -> bool:
        return self.outcome == "deny"

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Verdict:
        return cls(outcome=str(body.get("outcome")), tier=body.get("tier"), rule=body.get("rule"),
                   grant_id=body.get("grant_id"), reason=body.get("reason"), policy=bool(body.get("policy", True)),
                   raw=dict(body))


def check_body(action: str, params: Mapping[str, Any], *, risk: str | None, channel: str | None,
               requested_by: str | None, session: str | None) -> Json:
    body: Json = {"action": {"name": action, "params": dict(params)}}
    optional = {"risk": risk, "channel": channel, "requested_by": requested_by, "session": session}
    body.update({k: v for k, v in optional.items() if v is not None})
    return body


class PolicyCalls:
    """`SignoffClient.check_policy` (it provides `_send`: retries, backoff, errors)."""

    def _send(self, method: str, path: str, *, json: Any = None, key: str | None = None,
              timeout: httpx2.Timeout | None = None, allow_conflict: bool = False) -> tuple[Json, int]:
        raise NotImplementedError

    def check_policy(self, action: str, params: Mapping[str, Any], *, risk: str | None = None,
                     channel: str | None = None, requested_by: str | None = None,
                     session: str | None = None) -> Verdict:
        """The policy's verdict on `action(params)` now, without making a request."""
        body = check_body(action, params, risk=risk, channel=channel, requested_by=requested_by, session=session)
        return Verdict.from_json(self._send("POST", PATH, json=body)[0])


class AsyncPolicyCalls:
    """`AsyncSignoffClient.check_policy`: `PolicyCalls`, awaited."""

    async def _send(self, method: str, path: str, *, json: Any = None, key: str | None = None,
                    timeout: httpx2.Timeout | None = None, allow_conflict: bool = False) -> tuple[Json, int]:
        raise NotImplementedError

    async def check_policy(self, action: str, params: Mapping[str, Any], *, risk: str | None = None,
                           channel: str | None = None, requested_by: str | None = None,
                           session: str | None = None) -> Verdict:
        """The policy's verdict on `action(params)` now, without making a request."""
        body = check_body(action, params, risk=risk, channel=channel, requested_by=requested_by, session=session)
        return Verdict.from_json((await self._send("POST", PATH, json=body))[0])
