"""Who may do what with agent runs: start them, approve their tool calls, write into them, cancel them.

    SIGNOFF_RUN_STARTERS      who may `/signoff run` (unset: anyone in a channel the bot is in)
    SIGNOFF_RUN_APPROVERS     who approves a run's cards (unset: anyone who sees the card)
    SIGNOFF_RUN_SELF_APPROVAL whether the person who started a run may approve its cards (default: no)
    SIGNOFF_RUN_WRITERS       who, besides the run's starter and its approvers, may write into a run's
                              thread and cancel it (unset and nobody else named: anyone)

Entries are Slack user ids (U..., W...) or user group ids (S...). The starter of a run is its
`requested_by` when that is a Slack user id (runs started from Slack); runs started through the
API record their origin as text (`api:...`), never as a person.
Refusals are ephemeral notes; a refused action writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bot.approvals.access import GroupMembers, in_listed_group
from bot.domain.runs import Run


_USER = re.compile(r"^[UW][A-Z0-9]{1,39}$")

def starter_of(run: Run) -> str | None:
    """The Slack user who started `run`, if a person in Slack did."""
    who = run.requested_by
    return who if who and _USER.match(who) else None


@dataclass(frozen=True)
class RunAccess:
    starters: tuple[str, ...] = ()
    approvers: tuple[str, ...] = ()
    writers: tuple[str, ...] = ()
    self_approval: bool = False

    async def may_start(self, user_id: str, members: GroupMembers | None) -> bool:
        return not self.starters or await _listed(user_id, self.starters, members)

    def card_approvers(self) -> tuple[str, ...]:
        return self.approvers

    def duties(self, duties: dict[str, Any]) -> dict[str, Any]:
        """The runner's separation-of-duties fields (bot.agent.gates), with SIGNOFF_RUN_SELF_APPROVAL applied:
        by default the person who started the run is the requester of its cards and may not approve them."""
        if self.self_approval:
            return {**duties, "requester_may_approve": True}
        return duties

    async def may_write(self, run: Run, user_id: str, members: GroupMembers | None) -> bool:
        """Write into the run's thread (interventions) or cancel it."""
        starter = starter_of(run)
        allowed = [*([starter] if starter else []), *self.approvers, *self.writers]
        return not allowed or await _listed(user_id, allowed, members)


async def _listed(user_id: str, entries: Iterable[str], members: GroupMembers | None) -> bool:
    entries = list(entries)
    return user_id in entries or await in_listed_group(user_id, entries, members)
