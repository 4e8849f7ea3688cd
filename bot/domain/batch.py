"""Batch requests: several actions under one summary, decided item by item on one card.

Each item is decided approved or rejected; an item may be edited (its `params` replace the
proposal's, with `changes` saying what moved) while it is pending. The request is decided once
every item has an outcome: `approved` if at least one item was approved, else `rejected`, and
the decision lists every item's outcome, final parameters, changes and `params_sha256`.

Pure values; the card shows items in pages (`pages`), each page decided from its own message
("Approve selected" decides the items shown on that page; "Reject all" every undecided one).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from bot.domain.model import Action, Actor, Change, Outcome, Preview
from bot.domain.params_hash import params_sha256

MAX_ITEMS = 200
BATCH_ACTION = "batch"  # the request's `action.name` when it holds `items`


@dataclass(frozen=True)
class Item:
    """One action of a batch and, while the batch is pending, where it stands."""

    action: Action
    preview: Preview | None = None
    key: str | None = None  # the caller's id for it (Signoff's runner: the tool_use_id)
    params: dict[str, Any] | None = None  # the edited parameters; None: as proposed
    changes: tuple[Change, ...] = ()
    outcome: Outcome | None = None
    decided_by: Actor | None = None

    @property
    def final_params(self) -> dict[str, Any]:
        return self.action.params if self.params is None else self.params

    def evolve(self, **changes: Any) -> Item:
        return replace(self, **changes)

    def decision_json(self) -> dict[str, Any]:
        """The item in a decision: what the agent may run (and its hash), or that it must not."""
        params = self.final_params
        return {
            "name": self.action.name,
            "key": self.key,
            "outcome": self.outcome.value if self.outcome else None,
            "params": params,
            "changes": [c.to_json() for c in self.changes],
            "params_sha256": params_sha256(params),
            "decided_by": self.decided_by.to_json() if self.decided_by else None,
        }

    def to_json(self) -> dict[str, Any]:
        """Storage form (the request row's `items` column)."""
        return {
            "action": {"name": self.action.name, "params": self.action.params,
                       "params_schema": self.action.params_schema},
            "preview": {"kind": self.preview.kind, "data": self.preview.data} if self.preview else None,
            "key": self.key,
            "params": self.params,
            "changes": [c.to_json() for c in self.changes],
            "outcome": self.outcome.value if self.outcome else None,
            "decided_by": self.decided_by.to_json() if self.decided_by else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Item:
        a = data["action"]
        p = data.get("preview")
        d = data.get("decided_by")
        return cls(
            action=Action(a["name"], a.get("params") or {}, a.get("params_schema")),
            preview=Preview(p["kind"], p["data"]) if p else None,
            key=data.get("key"),
            params=data.get("params"),
            changes=tuple(Change(c["field"], c.get("from"), c.get("to")) for c in data.get("changes") or ()),
            outcome=Outcome(data["outcome"]) if data.get("outcome") else None,
            decided_by=Actor(d["id"], d.get("name")) if d else None,
        )


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
