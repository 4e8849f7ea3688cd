"""The issue-12 request fields of `POST /api/v1/approvals`: quorum, who asked, typed confirmation.

Policy tiers (issue 12a) will fill these in from the policy file; until then the API gives
them. Checked here so that a request nobody could ever approve is a 400 naming the field, not a
card that waits forever.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.api.schemas import ApprovalIn
from bot.domain.duties import able_to_approve, default_may_approve, requester_user_of
from bot.errors import InvalidInput


@dataclass(frozen=True)
class Duties:
    quorum: int
    requester_user: str | None
    requester_may_approve: bool
    confirm: str | None


def parse_duties(body: ApprovalIn, group_members: tuple[str, ...], *, policy: bool = False) -> Duties:
    """The request's quorum, requester, self-approval rule and confirmation string.

    With an approver list, the people on it (users listed directly and members of listed user
    groups, minus a requester who may not approve) must be at least `quorum`. Under a policy file
    (`policy`) a tier's approvers may stand in for the body's: the gate checks then (bot.approvals.gate).
    """
    requester = requester_user_of(body.requested_by, body.requester_user)
    may_approve = default_may_approve(requester, body.requester_may_approve)
    if body.approvers and body.quorum > 1 and not policy:
        people = able_to_approve(body.approvers, group_members, None if may_approve else requester)
        if people is not None and len(people) < body.quorum:
            message = (f"needs {body.quorum} distinct approvers but only {len(people)} "
                       f"{'person is' if len(people) == 1 else 'people are'} able to approve"
                       + (" (the requester may not approve)" if requester and not may_approve else ""))
            raise InvalidInput(f"invalid request body: quorum: {message}",
                               details=[{"field": "quorum", "message": message}])
    return Duties(body.quorum, requester, may_approve, body.confirm_text())
