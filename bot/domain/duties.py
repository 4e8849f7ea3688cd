"""Separation of duties: who may not approve a request, whatever list they are on.

A requester who is a Slack user (who started the run, the user a hook is configured with, or
`requested_by` given as a user id: the request's `requester_user`) may not approve their own
request unless it says `requester_may_approve`. Rejecting stays open to them: stopping one's
own request is never a conflict of interest. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from bot.domain.model import Request

SLACK_USER_ID = re.compile(r"^[UW][A-Z0-9]{1,39}$")


def requester_user_of(requested_by: str | None, given: str | None = None) -> str | None:
    """The requester's Slack user id: `given` if set, else `requested_by` when it is a user id."""
    if given:
        return given
    if requested_by and SLACK_USER_ID.match(requested_by):
        return requested_by
    return None


def default_may_approve(requester_user: str | None, given: bool | None) -> bool:
    """`given` if set; otherwise a requester who maps to a Slack user may not approve."""
    if given is not None:
        return given
    return requester_user is None


def approve_refusal(request: Request, user_id: str) -> str | None:
    """Why `user_id` may not approve `request` (Slack mrkdwn), or None if duties allow it."""
    if request.requester_user and request.requester_user == user_id and not request.requester_may_approve:
        return ("You asked for this yourself, and this request needs someone else to approve it "
                "(separation of duties), so your approval was not recorded. You can still reject it.")
    return None


def able_to_approve(approvers: Iterable[str], members: Iterable[str], excluded: str | None) -> set[str] | None:
    """The people who can give a vote: users listed directly and the known members of listed user
    groups, less `excluded` (a requester who may not approve). None when a group is listed and its
    members are not known: the count cannot be told, so no quorum is refused on it."""
    listed = tuple(approvers)
    known = set(members)
    if any(a.startswith("S") for a in listed) and not known:
        return None
    people = {a for a in listed if not a.startswith("S")} | known
    people.discard(excluded or "")
    return people
