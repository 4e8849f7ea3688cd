"""Use cases of batch requests: decide a page of items, reject the rest, edit one item.

Each is one guarded write of the request (`Service.guarded`), like every other change: two people
deciding different pages at once both land (the loser re-reads and re-applies its page to the
fresh items), two deciding the same page end with the first one's outcomes (decided items never
change). The write that gives the last undecided item its outcome is the request's decision,
made through `Service.decide` (decision row, audit, card update, webhook, wake-ups together).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot import effects
from bot.domain.batch import all_decided, decide_items, overall
from bot.domain.edits import compute_changes
from bot.domain.model import Actor, AuditEvent, Outcome, Request, Via
from bot.service import DecideResult, Service
from storage.base import Unit

_RETRIES = 50


class ItemDecided(Exception):
    """The item to edit already has an outcome."""


async def decide_items_of(
    service: Service,
    request_id: str,
    choose: Callable[[Request], dict[int, Outcome]],
    *,
    actor: Actor,
    via: Via,
    comment: str | None = None,
) -> DecideResult:
    """Give the items `choose(request)` names their outcomes; decide the request when none is left.

    `choose` is asked again on the fresh request after a lost race. `counted=True` in the result:
    items were decided and others still wait (on other pages).
    """
    for _ in range(_RETRIES):
        request = await service.get(request_id)
        if not request.is_pending:
            return DecideResult(request, won=False)
        chosen = choose(request)
        if not chosen:
            return DecideResult(request, won=False)
        items = decide_items(request.items, chosen, actor)
        if all_decided(items):
            result = await service.decide(request_id, overall(items), via=via, actor=actor, comment=comment,
                                          read=request, items=items)
            if result.won or not result.request.is_pending:
                return result
            continue  # someone changed the items meanwhile: choose again on what they are now

        async def store(unit: Unit, fresh: Request, chosen: dict[int, Outcome] = chosen) -> Request:
            now = service.clock.now()
            partial = fresh.evolve(items=decide_items(fresh.items, chosen, actor), updated_at=now)
            await service.write(unit, partial, fresh)
            await unit.append_audit(AuditEvent(fresh.id, "items_decided", now, actor.id, {
                "items": {str(i): o.value for i, o in sorted(chosen.items())}, "via": via.value}))
            await unit.enqueue(effects.update_card(fresh.id, f"card:{fresh.id}:v{fresh.version + 1}", now))
            await unit.notify(fresh.id)
            return partial.evolve(version=fresh.version + 1)

        stored = await service.guarded(request_id, store, read=request, retries=1)
        if stored.ran and stored.value is not None:
            return DecideResult(stored.value, won=True, counted=True)
    return DecideResult(await service.get(request_id), won=False)


async def edit_item(service: Service, request_id: str, index: int, params: dict[str, Any], *,
                    actor: Actor) -> DecideResult:
    """Replace one undecided item's parameters (validated by the caller); the item stays undecided.

    Raises ItemDecided if the item already has an outcome.
    """

    async def store(unit: Unit, request: Request) -> Request:
        item = request.items[index]
        if item.outcome is not None:
            raise ItemDecided(f"item {index + 1} is already {item.outcome.value}")
        changes = compute_changes(item.action.params, params)
        items = (*request.items[:index], item.evolve(params=params, changes=changes), *request.items[index + 1:])
        now = service.clock.now()
        edited = request.evolve(items=items, updated_at=now)
        await service.write(unit, edited, request)
        await unit.append_audit(AuditEvent(request.id, "item_edited", now, actor.id, {
            "item": index, "changes": [c.to_json() for c in changes]}))
        await unit.enqueue(effects.update_card(request.id, f"card:{request.id}:v{request.version + 1}", now))
        await unit.notify(request.id)
        return edited.evolve(version=request.version + 1)

    result = await service.guarded(request_id, store, retries=_RETRIES)
    if result.ran and result.value is not None:
        return DecideResult(result.value, won=True, counted=True)
    return DecideResult(result.request if result.settled else await service.get(request_id), won=False)
