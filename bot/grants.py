"""Use cases for remembered grants and delegation: the only way Slack handlers and the agent API
reach their storage (`storage.grants`). Each call is its own unit; times come from the clock."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime

from bot.clock import Clock
from bot.domain.grants import Delegation, Grant
from bot.domain.model import Kind, Outcome, Risk, Via
from bot.errors import InvalidInput
from storage.base import Store, Unit
from storage.grants import GrantStore


class Grants:
    def __init__(self, store: GrantStore, clock: Clock, requests: Store) -> None:
        self.store = store
        self.clock = clock
        self.requests = requests

    async def check_origin(self, grant: Grant) -> None:
        """A grant made over the API must come from a person's approval (an accepted suggestion):
        `request_id` names an approval of the same tool, not critical, that `created_by` approved
        in Slack, and the grant lists exactly that call's parameter names. A bearer token alone
        (which agents hold) can never grant itself anything. InvalidInput names the field."""
        def refuse(field: str, message: str) -> InvalidInput:
            return InvalidInput(f"invalid request body: {field}: {message}", details=[{"field": field,
                                                                                          "message": message}])
        request = await self.requests.get_request(grant.request_id or "")
        if request is None or request.kind is not Kind.APPROVAL:
            raise refuse("request_id", "must name an approval request a person approved")
        decision = request.decision
        if decision is None or decision.outcome is not Outcome.APPROVED or decision.decided_by is None \
                or decision.via not in (Via.BUTTON, Via.MODAL):
            raise refuse("request_id", f"request {request.id} was not approved by a person")
        if decision.decided_by.id != grant.created_by:
            raise refuse("created_by", f"must be the person who approved {request.id} ({decision.decided_by.id})")
        if request.action.name != grant.tool:
            raise refuse("tool", f"must be the tool of {request.id} ({request.action.name!r})")
        if request.risk is Risk.CRITICAL:
            raise refuse("request_id", "critical requests cannot be remembered")
        if set(grant.match) != set(request.action.params):
            raise refuse("match", f"must list exactly the parameters of {request.id}: "
                                  f"{', '.join(sorted(request.action.params)) or '(none)'}")

    async def create(self, grant: Grant) -> None:
        """Store a grant and its audit row (one unit)."""
        async with self.store.store.unit() as unit:
            await self.store.add(unit, grant)

    def adder(self, grant: Grant) -> Callable[[Unit], Awaitable[None]]:
        """Writes `grant` in a caller's unit (the decision that makes it: `Service.decide(also=...)`)."""
        async def add(unit: Unit) -> None:
            await self.store.add(unit, grant)

        return add

    async def get(self, grant_id: str) -> Grant | None:
        return await self.store.get(grant_id)

    async def live(self, *, limit: int = 100) -> list[Grant]:
        return await self.store.live(self.clock.now(), limit=limit)

    async def revoke(self, grant_id: str, by: str) -> bool:
        """True if this call revoked it (it stops matching from the next request, in every process)."""
        return await self.store.revoke(grant_id, by, self.clock.now())

    async def delegations_of(self, users: Iterable[str]) -> list[Delegation]:
        return await self.store.delegations_of(users, self.clock.now())

    async def away(self, user: str, delegate: str, until: datetime | None) -> Delegation:
        return await self.store.away(user, delegate, until, self.clock.now())

    async def back(self, user: str) -> int:
        return await self.store.back(user, self.clock.now())
