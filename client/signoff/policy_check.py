"""Ask the server what policy would do with some calls, before deciding whether to stop for a person.

    verdicts = client.check_policy([{"name": "read_file", "params": {"path": "/tmp/x"}}])
    verdicts[0].outcome      # "allow" | "deny" | "ask"; `.reason`, `.rule`, `.tier`

Advice, never a grant: nothing is written and no card is posted. An agent that acts on "allow" or
"deny" then submits the call (`submit`), which the server decides at once by the same policy and
records (no card); only "ask" calls need a person. A server older than the route (404) answers
"ask" for every call: asking a person is the safe side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx2

from signoff.errors import SignoffError, SignoffRequestError

Json = dict[str, Any]
PATH = "/api/v1/policy/check"
OUTCOMES = ("allow", "deny", "ask")


@dataclass(frozen=True)
class Verdict:
    """What policy would do with one call."""

    name: str
    outcome: str  # allow | deny | ask
    reason: str | None = None
    rule: str | None = None
    tier: str | None = None


def check_body(actions: Sequence[Mapping[str, Any]], *, risk: str | None, requested_by: str | None,
               channel: str | None, session: str | None) -> Json:
    if not actions:
        raise SignoffError("check_policy needs at least one action")
    shaped = []
    for action in actions:
        if not isinstance(action, Mapping) or not isinstance(action.get("name"), str):
            raise SignoffError("each action is a mapping with a `name` and its `params`")
        shaped.append({"name": action["name"], "params": dict(action.get("params") or {})})
    optional = {"risk": risk, "requested_by": requested_by, "channel": channel, "session": session}
    return {"actions": shaped, **{k: v for k, v in optional.items() if v is not None}}


def verdicts(body: Mapping[str, Any], count: int) -> list[Verdict]:
    items = body.get("items")
    if not isinstance(items, list) or len(items) != count:
        raise SignoffError(f"the server's policy check answered {body!r:.200}, not one verdict per call")
    found = []
    for item in items:
        outcome = item.get("outcome") if isinstance(item, Mapping) else None
        # Anything but a clear allow or deny asks a person: the side that fails closed.
        found.append(Verdict(str(item.get("name")), outcome if outcome in OUTCOMES else "ask", item.get("reason"),
                             item.get("rule"), item.get("tier")) if isinstance(item, Mapping) else
                     Verdict("", "ask"))
    return found


def all_ask(actions: Sequence[Mapping[str, Any]]) -> list[Verdict]:
    return [Verdict(str(a.get("name")), "ask", "the server has no policy check (404): a person decides")
            for a in actions]


class PolicyCalls:
    """`SignoffClient.check_policy` (it provides `_send`)."""

    def _send(self, method: str, path: str, *, json: Any = None, key: str | None = None,
              timeout: httpx2.Timeout | None = None, allow_conflict: bool = False) -> tuple[Json, int]:
        raise NotImplementedError

    def check_policy(self, actions: Sequence[Mapping[str, Any]], *, risk: str | None = None,
                     requested_by: str | None = None, channel: str | None = None,
                     session: str | None = None) -> list[Verdict]:
        """Policy's verdict on each of `actions` ({name, params}), in order. Writes nothing."""
        body = check_body(actions, risk=risk, requested_by=requested_by, channel=channel, session=session)
        try:
            return verdicts(self._send("POST", PATH, json=body)[0], len(actions))
        except SignoffRequestError as exc:
            if exc.status != 404:
                raise
            return all_ask(actions)


class AsyncPolicyCalls:
    """`AsyncSignoffClient.check_policy`, awaited."""

    async def _send(self, method: str, path: str, *, json: Any = None, key: str | None = None,
                    timeout: httpx2.Timeout | None = None, allow_conflict: bool = False) -> tuple[Json, int]:
        raise NotImplementedError

    async def check_policy(self, actions: Sequence[Mapping[str, Any]], *, risk: str | None = None,
                           requested_by: str | None = None, channel: str | None = None,
                           session: str | None = None) -> list[Verdict]:
        """Policy's verdict on each of `actions` ({name, params}), in order. Writes nothing."""
        body = check_body(actions, risk=risk, requested_by=requested_by, channel=channel, session=session)
        try:
            return verdicts((await self._send("POST", PATH, json=body))[0], len(actions))
        except SignoffRequestError as exc:
            if exc.status != 404:
                raise
            return all_ask(actions)
