"""Quorum: a request that needs N distinct approvers collects votes until N have approved.

Pure rules; storage makes each vote its own guarded write (a `votes` row unique per
(request, voter), in the same transaction as a version-guarded update of the request), so
concurrent votes never lose one and never count one person twice.

Invariants:
- one person counts at most once (`cast` says DUPLICATE for a second vote);
- the vote that brings the approvals to `quorum` completes the request (it becomes the decision's
  `decided_by`); votes after that are never counted;
- one rejection rejects (that is a decision, not a vote to tally).
"""

from __future__ import annotations

import enum
from typing import Any

from bot.domain.model import Vote

__all__ = ["Tally", "Vote", "cast", "votes_json", "votes_from_json"]


class Tally(enum.Enum):
    COUNTED = "counted"  # counted; more approvals are needed
    COMPLETES = "completes"  # this vote reaches the quorum: the request is approved
    DUPLICATE = "duplicate"  # this person already approved: nothing changes


def cast(votes: tuple[Vote, ...], quorum: int, voter_id: str) -> Tally:
    """What one more approval from `voter_id` does to a pending request holding `votes`."""
    if any(v.voter.id == voter_id for v in votes):
        return Tally.DUPLICATE
    return Tally.COMPLETES if len(votes) + 1 >= max(1, quorum) else Tally.COUNTED


def votes_json(votes: tuple[Vote, ...]) -> list[dict[str, Any]]:
    return [v.to_json() for v in votes]


def votes_from_json(data: Any) -> tuple[Vote, ...]:
    return tuple(Vote.from_json(v) for v in data or ())
