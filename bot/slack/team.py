"""The workspace this bot is installed in, and the check that a signed Slack request is addressed to it.

Slack signs every request with the app's signing secret, whichever workspace the app is installed in:
a signature says "from Slack, for this app", not "for this installation". A Signoff process serves one
installation (one bot token), so a request addressed to another workspace is refused: acked (Slack must
not retry it), nothing read or written, one WARNING line per foreign workspace.

Which workspace a request is addressed to is Bolt's `extract_team_id`: a modal's
`view.app_installed_team_id`, else `team.id`, else the Events API's `authorizations[0].team_id`, else
`team_id`. Those name the installation, not the person: in a Slack Connect channel a person from another
workspace has their own `user.team_id` while the payload still names our installation, so they are let
through (whether they may decide is the access check's business, not this one's). An org-wide (Enterprise
Grid) installation is matched on its enterprise id instead.

Ours comes from `auth.test`: given at start-up (`signoff serve` calls it before serving), else asked once
on the first Slack request. Until Slack answers it, requests are refused with 503 (fail closed; Slack
shows the person an error and retries events).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from slack_bolt.request.internals import extract_enterprise_id, extract_team_id
from slack_bolt.response import BoltResponse

log = logging.getLogger(__name__)

ASK_WITHIN_SECONDS = 2.0  # a first request waits this long for auth.test (Slack gives up after 3 s)
_REMEMBERED = 1000  # foreign workspaces logged so far, at most


@dataclass(frozen=True)
class Installation:
    """Where the bot token belongs (auth.test)."""

    team_id: str | None
    enterprise_id: str | None = None
    enterprise_install: bool = False

    @classmethod
    def from_auth_test(cls, answer: Mapping[str, Any]) -> Installation:
        return cls(team_id=answer.get("team_id") or None, enterprise_id=answer.get("enterprise_id") or None,
                   enterprise_install=bool(answer.get("is_enterprise_install")))


def needs_no_team(body: Mapping[str, Any]) -> bool:
    """Slack's own checks of the URL, which name no workspace."""
    return body.get("type") == "url_verification" or body.get("ssl_check") == "1"


def addressed_to(body: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(team id, enterprise id) of the installation a payload is for; (None, None) if it names none."""
    payload = body if isinstance(body, dict) else dict(body)
    try:
        team, enterprise = extract_team_id(payload), extract_enterprise_id(payload)
    except (TypeError, AttributeError, KeyError, IndexError):  # a signed body of the wrong shape names nothing
        return None, None
    return (team if isinstance(team, str) else None), (enterprise if isinstance(enterprise, str) else None)


def foreign(body: Mapping[str, Any], ours: Installation) -> str | None:
    """Why `body` is not for our installation (the workspace it names), or None if it is."""
    if needs_no_team(body):
        return None
    team, enterprise = addressed_to(body)
    if ours.enterprise_install and ours.enterprise_id:
        if enterprise == ours.enterprise_id:
            return None
        return f"enterprise {enterprise or '(none)'}"
    if team is not None and team == ours.team_id:
        return None
    return f"workspace {team or '(none)'}"


class InstalledTeam:
    """Our installation: told (`learned`) or asked of Slack once (`get`), then kept for the process's life."""

    def __init__(self, auth_test: Callable[[], Awaitable[Mapping[str, Any]]]) -> None:
        self._auth_test = auth_test
        self.known: Installation | None = None
        self._asking: asyncio.Task[Installation] | None = None
        self._logged: set[str] = set()
        self._unknown_logged = False

    def learned(self, installation: Installation) -> None:
        if installation.team_id or installation.enterprise_id:
            self.known = installation

    async def get(self) -> Installation | None:
        """Ours, or None if Slack has not told us within ASK_WITHIN_SECONDS (asking goes on meanwhile)."""
        if self.known is not None:
            return self.known
        if self._asking is None or (self._asking.done() and (self._asking.cancelled() or self._asking.exception())):
            self._asking = asyncio.create_task(self._ask(), name="signoff-auth-test")
        done, _ = await asyncio.wait({self._asking}, timeout=ASK_WITHIN_SECONDS)
        if done and not self._asking.cancelled() and self._asking.exception() is None:
            return self.known
        if not self._unknown_logged:
            self._unknown_logged = True
            why = self._asking.exception() if done and not self._asking.cancelled() else "no answer yet"
            log.warning("Slack requests are refused (503) until auth.test says which workspace the bot is "
                        "installed in: %s", why)
        return None

    async def _ask(self) -> Installation:
        answer = await self._auth_test()
        self.learned(Installation.from_auth_test(answer))
        if self.known is None:
            raise ValueError("auth.test named no team_id")
        self._unknown_logged = False
        return self.known

    def refused(self, where: str) -> None:
        """Log a refusal: once per foreign workspace (a distributed app may hear from many, often)."""
        if where in self._logged or len(self._logged) >= _REMEMBERED:
            log.debug("refused a signed Slack request for %s", where)
            return
        self._logged.add(where)
        ours = self.known.team_id if self.known else None
        log.warning("refused a signed Slack request for %s: this bot is installed in workspace %s "
                    "(acked, nothing done; further ones from there are not logged)", where, ours)

    async def check(self, body: Mapping[str, Any]) -> int | None:
        """None if `body` may be handled; else the HTTP status to answer with (200: acked, dropped)."""
        if needs_no_team(body):
            return None
        ours = self.known or await self.get()
        if ours is None:
            return 503
        where = foreign(body, ours)
        if where is None:
            return None
        self.refused(where)
        return 200

    def middleware(self) -> Callable[..., Awaitable[BoltResponse]]:
        """The same check as Bolt global middleware (Socket Mode's requests reach Bolt directly)."""
        async def only_our_team(body: dict[str, Any], next: Callable[[], Awaitable[BoltResponse]]) -> BoltResponse:
            status = await self.check(body)
            if status is None:
                return await next()
            return BoltResponse(status=status, body="")

        return only_our_team
