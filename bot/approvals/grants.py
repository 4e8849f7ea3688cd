"""Use cases for remembered grants and delegation: the only way Slack handlers and the agent API
reach their storage (`storage.grants`). Each call is its own unit; times come from the clock.

Who may see and revoke a grant (`manageable`, `may_revoke`; issue 33):
- a person in Slack: the person who made it, the listed approvers (users, or members of listed user
  groups) of the request it was made on (the people who could have made it), and the policy's
  `grant_admins` (every grant). A grant made on a request that listed no approvers is its maker's
  and the admins'. A user group Slack cannot list right now lets nobody through on its account.
- an API token (`of_token`): an `agent` token lists the grants made on its own requests (which are
  all the grants scoped to it: `agent` grants name the token, `run` grants a session it named); an
  `admin` token lists every grant and may revoke one, recorded as `api:<token name>`.
No API call creates a grant: they come only from a person's click in Slack.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime

from bot.approvals.access import GroupMembers, GroupsUnknown, in_listed_group
from bot.process.clock import Clock
from bot.domain.grants import Delegation, Grant
from storage.base import Unit
from storage.grants import GrantStore


class Grants:
    def __init__(self, store: GrantStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def adder(self, grant: Grant) -> Callable[[Unit], Awaitable[None]]:
        """Writes `grant` in a caller's unit (the decision that makes it: `Service.decide(also=...)`)."""
        async def add(unit: Unit) -> None:
            await self.store.add(unit, grant)

        return add

    async def get(self, grant_id: str) -> Grant | None:
        return await self.store.get(grant_id)

    async def live(self, *, limit: int = 100) -> list[Grant]:
        return await self.store.live(self.clock.now(), limit=limit)

    async def of_token(self, name: str, *, admin: bool, limit: int = 500) -> list[Grant]:
        """What an API token may list: every live grant (admin), or those made on its own requests."""
        if admin:
            return await self.live(limit=limit)
        return [g for g, _ in await self.store.live_with_origins(self.clock.now(), limit=limit, owner=name)]

    async def manageable(self, user: str, *, admins: Iterable[str], members: GroupMembers | None,
                         limit: int = 1000) -> list[Grant]:
        """The live grants `user` may see and revoke in Slack, newest first (see the module docstring).
        A user group Slack cannot list right now counts as one `user` is not in (fail closed)."""
        rows = await self.store.live_with_origins(self.clock.now(), limit=limit)
        try:
            admin = await _listed(user, tuple(admins), members)
        except GroupsUnknown:
            admin = False
        if admin:
            return [grant for grant, _ in rows]
        found = []
        for grant, approvers in rows:
            try:
                if grant.created_by == user or await _listed(user, approvers, members):
                    found.append(grant)
            except GroupsUnknown:
                continue  # fail closed: not shown, as for someone who may not see it
        return found

    async def may_revoke(self, user: str, grant: Grant, *, admins: Iterable[str],
                         members: GroupMembers | None) -> bool:
        """Whether `user` may revoke `grant` in Slack. Raises GroupsUnknown when it rests on a group Slack
        could not list (nothing is revoked then)."""
        if grant.created_by == user or await _listed(user, tuple(admins), members):
            return True
        return await _listed(user, await self.store.origin_approvers(grant), members)

    async def revoke(self, grant_id: str, by: str) -> bool:
        """True if this call revoked it (it stops matching from the next request, in every process)."""
        return await self.store.revoke(grant_id, by, self.clock.now())

    async def delegations_of(self, users: Iterable[str]) -> list[Delegation]:
        return await self.store.delegations_of(users, self.clock.now())

    async def away(self, user: str, delegate: str, until: datetime | None) -> Delegation:
        return await self.store.away(user, delegate, until, self.clock.now())

    async def back(self, user: str) -> int:
        return await self.store.back(user, self.clock.now())


async def _listed(user: str, entries: tuple[str, ...], members: GroupMembers | None) -> bool:
    """`user` is one of `entries` (user ids) or a member of a user group among them."""
    return user in entries or await in_listed_group(user, entries, members)
