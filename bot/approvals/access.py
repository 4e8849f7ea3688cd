"""Who may decide a request: its listed approvers (users, or members of listed user groups).

No list means anyone who sees the card may decide. Everything that refuses a click, a thread
answer or a Home-tab button asks here, so one rule holds wherever a decision can come from.

A user group's members are Slack's to tell (bot/slack/directory.py). When Slack cannot tell them
(an error answer, 5xx after the client's retries, no answer) and no other entry lets the person
through, the check fails closed with `GroupsUnknown`: nothing is decided, and the caller tells the
person that their input was not recorded and why, rather than dropping it without a word.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from bot.domain.model import Request

log = logging.getLogger(__name__)


class Directory(Protocol):
    """Who is who in Slack (implemented over the Web API with a cache)."""

    async def group_members(self, group_id: str) -> frozenset[str]:
        """Members of a user group; raises LookupError if Slack does not know the group."""
        ...


GroupMembers = Callable[[str], Awaitable[frozenset[str]]]


class GroupsUnknown(Exception):
    """Whether a person may act rests on user groups whose members Slack could not tell just now."""

    def __init__(self, groups: tuple[str, ...], errors: tuple[BaseException, ...] = ()) -> None:
        super().__init__(f"could not list the members of {', '.join(groups)}")
        self.groups = groups
        self.errors = errors  # why, group by group (Slack's errors, timeouts)


# Of Slack's 3 s to acknowledge (bot/process/slack_endpoint.py answers within 2.5 s), what a user group's lookup may take
# in a check that must answer before the ack (a command, a form's inline errors).
PRE_ACK_LOOKUP_SECONDS = 1.5


def bounded(members: GroupMembers | None, seconds: float) -> GroupMembers | None:
    """`members`, giving up once `seconds` have passed from now, over all the lookups of one check (for
    checks that must answer before Slack's ack deadline): a group that did not answer in time counts
    as one Slack could not list."""
    if members is None:
        return None
    lookup = members
    deadline = asyncio.get_running_loop().time() + seconds

    async def within(group_id: str) -> frozenset[str]:
        return await asyncio.wait_for(lookup(group_id), max(0.0, deadline - asyncio.get_running_loop().time()))
    return within


async def in_listed_group(user_id: str, entries: Iterable[str], members: GroupMembers | None) -> bool:
    """Whether `user_id` is in one of the user groups among `entries`. A group Slack does not know
    lets nobody through; `GroupsUnknown` when none let them through and some could not be listed."""
    failed: list[str] = []
    errors: list[BaseException] = []
    for entry in entries:
        if not entry.startswith("S") or members is None:
            continue
        try:
            if user_id in await members(entry):
                return True
        except LookupError:
            log.warning("unknown user group %s", entry)
        except Exception as exc:  # Slack's error, its 5xx after the retries, no answer: not a "no"
            log.warning("could not list the members of %s", entry, exc_info=True)
            failed.append(entry)
            errors.append(exc)
    if failed:
        raise GroupsUnknown(tuple(failed), tuple(errors))
    return False


class Access:
    def __init__(
        self, directory: Directory | None, *,
        still_delegate: Callable[[Request, str], Awaitable[bool]] | None = None,
    ) -> None:
        self.directory = directory
        # False when the user is listed only as a delegate whose delegation has ended
        # (bot.approvals.gate.PolicyGate.still_delegate): returning from being away ends a delegation.
        self.still_delegate = still_delegate

    async def may_decide(self, request: Request, user_id: str, *, within: float | None = None) -> bool:
        """Listed approvers (users, or members of listed user groups) may decide; no list: anyone.
        Raises `GroupsUnknown` when it rests on groups Slack could not list (within `within` seconds)."""
        if not request.approvers:
            return True
        if user_id in request.approvers and (self.still_delegate is None
                                             or await self.still_delegate(request, user_id)):
            return True
        members = self.directory.group_members if self.directory is not None else None
        return await in_listed_group(user_id, request.approvers,
                                     bounded(members, within) if within is not None else members)
