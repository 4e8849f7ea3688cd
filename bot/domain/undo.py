"""The undo window: a person's Approve that waits a little before the agent hears it.

A tier with `undo: 30s` in policy gives each of its requests a window (`extra["undo_seconds"]`, set at
submit from policy alone). When a person's approval completes such a request, the request stays
*pending*: the approval is held (`extra["held"]`, this module's `Held`) and the row's `undo_until`
(and `next_due_at`) is the window's end. While it is pending nothing reaches the agent: a long-poll
keeps waiting, no webhook is sent, Signoff's runner does not resume. Then exactly one of:

- the window ends: the timer sweep (or the process that held it, on time) writes the held approval as
  the decision, through the same guarded write every decision takes; the agent hears it then;
- the approver clicks Undo before it ends: the hold is cleared, the request is pending as before with
  a note on the card ("undone by X") and an `undone` audit row.

Both are guarded writes on the request's version, so an Undo racing the window's end has one outcome.
A Reject is never held: there is nothing to run, so nothing to undo.

A batch's last click (Approve selected, an item's own Edit and approve, ...) is held the same way when
the batch ends approved: the hold keeps the items as that click decided them (`Held.items`), the
request's own items stay as they were before it, so an Undo puts exactly what that click decided back
to pending (items decided by earlier clicks keep their outcome). An approval that also makes grants
("Approve & remember", an accepted Claude suggestion) keeps the grants, not yet written, in the hold
(`Held.grants`): they are written with the decision when the window ends, so a grant cannot approve
other requests while the person may still take it back, and an Undo leaves no grant behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.domain.batch import items_from_json, items_json
from bot.domain.grants import Grant
from bot.domain.model import Actor, Change, Item, Request, Via
from bot.domain.values import from_iso, iso

UNDO_KEY = "undo_seconds"  # the request's window, from its tier in policy
HELD_KEY = "held"  # the approval waiting for its window to end
UNDONE_KEY = "undone"  # the latest Undo: who and when (the card's note)


def window(request: Request) -> timedelta | None:
    """The undo window policy gave `request`, or None."""
    seconds = request.extra.get(UNDO_KEY)
    return timedelta(seconds=int(seconds)) if isinstance(seconds, int) and seconds > 0 else None


@dataclass(frozen=True)
class Held:
    """A person's approval, as their click gave it, waiting for `until`."""

    actor: Actor
    via: Via
    at: datetime  # the click
    until: datetime  # the window's end
    params: dict[str, Any] | None = None  # edited parameters; None: as proposed
    changes: tuple[Change, ...] = ()
    comment: str | None = None
    extra: dict[str, Any] | None = None  # keys merged into the request's extra with the decision
    items: tuple[Item, ...] | None = None  # a batch: its items as this click decided them
    grants: tuple[Grant, ...] = ()  # grants this approval makes, written when the window ends

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "actor": self.actor.to_json(), "via": self.via.value, "at": iso(self.at), "until": iso(self.until),
            "params": self.params, "changes": [c.to_json() for c in self.changes], "comment": self.comment,
            "extra": self.extra,
        }
        if self.items:
            found["items"] = items_json(self.items)
        if self.grants:
            found["grants"] = [g.to_json() for g in self.grants]
        return found

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Held:
        actor = data["actor"]
        return cls(
            actor=Actor(str(actor["id"]), actor.get("name")), via=Via(data["via"]), at=from_iso(data["at"]),
            until=from_iso(data["until"]), params=data.get("params"),
            changes=tuple(Change(c["field"], c.get("from"), c.get("to")) for c in data.get("changes") or ()),
            comment=data.get("comment"), extra=data.get("extra"),
            items=items_from_json(data["items"]) if data.get("items") else None,
            grants=tuple(Grant.from_json(g) for g in data.get("grants") or ()),
        )


def held(request: Request) -> Held | None:
    """The approval `request` holds in its window, if any."""
    data = request.extra.get(HELD_KEY)
    return Held.from_json(data) if request.is_pending and isinstance(data, dict) else None


def undone(request: Request) -> dict[str, Any] | None:
    """{"by": user id, "at": iso} of the latest Undo, for the card's note."""
    data = request.extra.get(UNDONE_KEY)
    return data if isinstance(data, dict) else None


def hold(request: Request, held_: Held, now: datetime) -> Request:
    """`request` with `held_` waiting in its window (pending still; due at the window's end)."""
    extra = {k: v for k, v in request.extra.items() if k != UNDONE_KEY}
    extra[HELD_KEY] = held_.to_json()
    return request.evolve(extra=extra, undo_until=held_.until, next_due_at=held_.until, updated_at=now)


def release(request: Request, next_due_at: datetime | None, by: Actor, now: datetime) -> Request:
    """`request` back to pending after an Undo by `by`: no hold, its own timers due again."""
    extra = {k: v for k, v in request.extra.items() if k != HELD_KEY}
    extra[UNDONE_KEY] = {"by": by.id, "at": iso(now)}
    return request.evolve(extra=extra, undo_until=None, next_due_at=next_due_at, updated_at=now)


def without_hold(extra: dict[str, Any]) -> dict[str, Any]:
    """A decided request's extra: the hold written as the decision, no longer kept beside it."""
    return {k: v for k, v in extra.items() if k not in (HELD_KEY, UNDONE_KEY)}
