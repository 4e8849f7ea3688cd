"""Use cases of batch requests: give items their outcomes (a page, every undecided one, or one item).

Each is one guarded write of the request (`Service.guarded`), like every other change: two people
deciding different items at once both land (the loser re-reads and re-applies its choices to the
fresh items), two deciding the same item end with the first one's outcome (decided items never
change). The write that gives the last undecided item its outcome is the request's decision,
made through `Service.decide` (decision row, audit, card update, webhook, wake-ups together).
Whether a choice is offered at all is checked by the caller first (`choice_refusal`), so a
refused click writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bot.outbox import effects
from bot.domain.batch import Choice, all_decided, decide_items, overall
from bot.domain.model import Actor, AuditEvent, Outcome, Request, Via
from bot.domain.undo import held
from bot.approvals.checked import Recheck
from bot.approvals.service import DecideResult, Service
from storage.base import Unit

_RETRIES = 50
HELD_REFUSAL = ("This batch was just approved and waits in its undo window before it runs; only the person who "
                "approved it can undo that. Nothing was changed.")


async def decide_items_of(
    service: Service,
    request_id: str,
    choose: Callable[[Request], Mapping[int, Outcome | Choice]],
    *,
    actor: Actor,
    via: Via,
    recheck: Recheck,
    comment: str | None = None,
) -> DecideResult:
    """Give the items `choose(request)` names their outcomes; decide the request when none is left.

    `choose` is asked again on the fresh request after a lost race (it names only undecided items;
    decided ones keep their outcome anyway). `counted=True` in the result: items were decided and
    others still wait. `won=False`: nothing was written (everything chosen was decided already).
    `recheck(request)`: why the person may not decide it (`refused`, nothing written), run on every read
    before anything is written on it (bot/approvals/checked.py): both writes below are guarded on that read.
    """
    for _ in range(_RETRIES):
        request = await service.get(request_id)
        if not request.is_pending:
            return DecideResult(request, won=False)
        if held(request) is not None:  # approved, in its undo window: only an Undo changes it now
            return DecideResult(request, won=False, refused=HELD_REFUSAL)
        refusal = await recheck(request)
        if refusal is not None:
            return DecideResult(request, won=False, refused=refusal)
        chosen = {i: c for i, c in choose(request).items() if request.items[i].outcome is None}
        if not chosen:
            return DecideResult(request, won=False)
        items = decide_items(request.items, chosen, actor)
        if all_decided(items):
            result = await service.decide(request_id, overall(items), via=via, actor=actor, comment=comment,
                                          read=request, items=items)
            if result.won or not result.request.is_pending:
                return result
            continue  # someone changed the items meanwhile: choose again on what they are now

        async def store(unit: Unit, fresh: Request, chosen: dict[int, Outcome | Choice] = chosen) -> Request:
            now = service.clock.now()
            partial = fresh.evolve(items=decide_items(fresh.items, chosen, actor), updated_at=now)
            await service.write(unit, partial, fresh)
            await unit.append_audit(AuditEvent(fresh.id, "items_decided", now, actor.id, _audit(partial, chosen, via)))
            await unit.enqueue(effects.update_card(fresh.id, f"card:{fresh.id}:v{fresh.version + 1}", now))
            await unit.notify(fresh.id)
            return partial.evolve(version=fresh.version + 1)

        stored = await service.guarded(request_id, store, read=request, retries=1)
        if stored.ran and stored.value is not None:
            return DecideResult(stored.value, won=True, counted=True)
    return DecideResult(await service.get(request_id), won=False)


async def decide_item(service: Service, request_id: str, index: int, choice: Choice, *, actor: Actor,
                      recheck: Recheck) -> DecideResult:
    """One item's own decision (Edit and approve, Reject with a reason, Reply instead), if still undecided."""
    # The batch's own `via` when this item completes it: modal (a reply is per item, in the item's `via`).
    return await decide_items_of(service, request_id, lambda r: {index: choice}, actor=actor, via=Via.MODAL,
                                 recheck=recheck)


def _audit(request: Request, chosen: Mapping[int, Outcome | Choice], via: Via) -> dict[str, Any]:
    outcomes = {str(i): o.value for i in sorted(chosen) if (o := request.items[i].outcome) is not None}
    data: dict[str, Any] = {"items": outcomes, "via": via.value}
    edited = {str(i): [c.to_json() for c in request.items[i].changes] for i, c in sorted(chosen.items())
              if isinstance(c, Choice) and c.params is not None}
    if edited:
        data["changes"] = edited
    return data
