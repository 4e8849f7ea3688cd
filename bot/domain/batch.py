"""Batch requests: several actions under one summary, decided item by item on one card.

Each item ends approved or rejected, with a decision of its own: approved as proposed, approved
with edits (its `params` replace the proposal's, `changes` say what moved), rejected (with an
optional reason as `comment`), or answered in its place ("Reply instead": rejected with `via` =
reply and the answer as `comment`; the action must not run). An item offers only its own
`allowed` decisions (`bot.domain.choices`); `choice_refusal` says why a choice is not offered.
The request is decided once every item has an outcome: `approved` if at least one item was
approved, else `rejected`, and the decision lists every item's outcome, final parameters,
changes, comment and `params_sha256`. Decided items never change: the first choice stands.

Pure values; the card shows items in pages (`pages`), each page decided from its own message
("Approve selected" decides the items shown on that page; "Reject all" every undecided one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.domain.choices import LABELS, offered_of
from bot.domain.edits import compute_changes
from bot.domain.model import Actor, Item, Outcome, Request, Via

__all__ = ["BATCH_ACTION", "MAX_ITEMS", "Choice", "Item", "all_decided", "choice_refusal", "decide_items",
           "items_from_json", "items_json", "offered", "overall", "pages"]

MAX_ITEMS = 200
BATCH_ACTION = "batch"  # the request's `action.name` when it holds `items`


@dataclass(frozen=True)
class Choice:
    """What a person chose for one item. `params`: approved with these (edited) parameters."""

    outcome: Outcome
    via: Via | None = None
    comment: str | None = None
    params: dict[str, Any] | None = None

    @property
    def decision(self) -> str:
        """The choice in `bot.domain.choices` terms: approve, edit, reject or respond."""
        if self.via is Via.REPLY:
            return "respond"
        if self.outcome is Outcome.APPROVED:
            return "edit" if self.params is not None else "approve"
        return "reject"


def items_json(items: tuple[Item, ...]) -> list[dict[str, Any]] | None:
    return [i.to_json() for i in items] if items else None


def items_from_json(data: Any) -> tuple[Item, ...]:
    return tuple(Item.from_json(i) for i in data or ())


def pages(count: int, per_page: int) -> list[range]:
    """Item indexes per page: page 0 is the card itself, the others its continuation messages."""
    per_page = max(1, per_page)
    return [range(start, min(start + per_page, count)) for start in range(0, count, per_page)] or [range(0)]


def offered(item: Item) -> tuple[str, ...]:
    """The decisions `item` offers, in DECISIONS order."""
    return offered_of(item.allowed)


def choice_refusal(index: int, item: Item, decision: str) -> str | None:
    """Why `decision` ("approve", "edit", "reject", "respond") is not offered for item `index`, or None."""
    if item.outcome is not None:
        return f"Action {index + 1} is already {item.outcome.value}."
    allowed = offered(item)
    if decision in allowed:
        return None
    names = ", ".join(LABELS[d] for d in allowed) or "nothing"
    what = {"approve": "approved as it is", "edit": "edited", "reject": "rejected",
            "respond": "answered with a reply"}.get(decision, decision)
    return f"Action {index + 1} ({item.action.name}) cannot be {what}: it offers {names}."


def decide_items(items: tuple[Item, ...], chosen: Mapping[int, Outcome | Choice], actor: Actor | None) -> tuple[Item, ...]:
    """`items` with the undecided ones in `chosen` given their outcome (decided items never change)."""
    out = []
    for i, item in enumerate(items):
        given = chosen.get(i)
        if given is None or item.outcome is not None:
            out.append(item)
            continue
        choice = given if isinstance(given, Choice) else Choice(given)
        edited: dict[str, Any] = {}
        if choice.params is not None:
            edited = {"params": choice.params, "changes": compute_changes(item.action.params, choice.params)}
        out.append(item.evolve(outcome=choice.outcome, decided_by=actor, via=choice.via, comment=choice.comment,
                               **edited))
    return tuple(out)


def all_decided(items: tuple[Item, ...]) -> bool:
    return bool(items) and all(i.outcome is not None for i in items)


def overall(items: tuple[Item, ...]) -> Outcome:
    """A batch is approved if any item was: the per-item outcomes say which."""
    return Outcome.APPROVED if any(i.outcome is Outcome.APPROVED for i in items) else Outcome.REJECTED


def page_ts(request: Request, page: int) -> str | None:
    """The ts of a batch card's page `page` (1, 2, ...) once it is posted (kept in `extra["pages"]`)."""
    stored = (request.extra.get("pages") or {}).get(str(page))
    return stored if isinstance(stored, str) else None
