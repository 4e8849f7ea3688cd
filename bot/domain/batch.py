"""Batch requests: several actions under one summary, decided item by item on one card.

Each item is decided approved or rejected; an item may be edited (its `params` replace the
proposal's, with `changes` saying what moved) while it is pending. The request is decided once
every item has an outcome: `approved` if at least one item was approved, else `rejected`, and
the decision lists every item's outcome, final parameters, changes and `params_sha256`.

Pure values; the card shows items in pages (`pages`), each page decided from its own message
("Approve selected" decides the items shown on that page; "Reject all" every undecided one).
"""

from __future__ import annotations

from typing import Any

from bot.domain.model import Actor, Item, Outcome

__all__ = ["BATCH_ACTION", "MAX_ITEMS", "Item", "all_decided", "decide_items", "items_from_json", "items_json",
           "overall", "pages"]

MAX_ITEMS = 200
BATCH_ACTION = "batch"  # the request's `action.name` when it holds `items`


def items_json(items: tuple[Item, ...]) -> list[dict[str, Any]] | None:
    return [i.to_json() for i in items] if items else None


def items_from_json(data: Any) -> tuple[Item, ...]:
    return tuple(Item.from_json(i) for i in data or ())


def pages(count: int, per_page: int) -> list[range]:
    """Item indexes per page: page 0 is the card itself, the others its continuation messages."""
    per_page = max(1, per_page)
    return [range(start, min(start + per_page, count)) for start in range(0, count, per_page)] or [range(0)]


def decide_items(items: tuple[Item, ...], chosen: dict[int, Outcome], actor: Actor | None) -> tuple[Item, ...]:
    """`items` with the undecided ones in `chosen` given their outcome (decided items never change)."""
    return tuple(
        item.evolve(outcome=chosen[i], decided_by=actor) if i in chosen and item.outcome is None else item
        for i, item in enumerate(items)
    )


def all_decided(items: tuple[Item, ...]) -> bool:
    return bool(items) and all(i.outcome is not None for i in items)


def overall(items: tuple[Item, ...]) -> Outcome:
    """A batch is approved if any item was: the per-item outcomes say which."""
    return Outcome.APPROVED if any(i.outcome is Outcome.APPROVED for i in items) else Outcome.REJECTED
