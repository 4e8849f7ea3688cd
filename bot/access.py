"""Who may decide a request: its listed approvers (users, or members of listed user groups).

No list means anyone who sees the card may decide. Everything that refuses a click, a thread
answer or a Home-tab button asks here, so one rule holds wherever a decision can come from.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from bot.domain.model import Request

log = logging.getLogger(__name__)


class Directory(Protocol):
    """Who is who in Slack (implemented over the Web API with a cache)."""

    async def group_members(self, group_id: str) -> frozenset[str]:
        """Members of a user group; raises LookupError if Slack does not know the group."""
        ...


class Access:
    def __init__(
        self, directory: Directory | None, *,
        still_delegate: Callable[[Request, str], Awaitable[bool]] | None = None,
    ) -> None:
        self.directory = directory
        # False when the user is listed only as a delegate whose delegation has ended
        # (bot.gate.PolicyGate.still_delegate): returning from being away ends a delegation.
        self.still_delegate = still_delegate

    async def may_decide(self, request: Request, user_id: str) -> bool:
        """Listed approvers (users, or members of listed user groups) may decide; no list: anyone."""
        if not request.approvers:
            return True
        if user_id in request.approvers and (self.still_delegate is None
                                             or await self.still_delegate(request, user_id)):
            return True
        for entry in request.approvers:
            if entry.startswith("S") and self.directory is not None:
                try:
                    if user_id in await self.directory.group_members(entry):
                        return True
                except LookupError:
                    log.warning("unknown user group %s on request %s", entry, request.id)
        return False
