"""The state of a pending request as this process last committed it, for an Approve click's check.

A click reads its request to check it (pending, an approval, the clicker one of its approvers, the
button on the request's card) and then writes the decision guarded on the version it read. When
the request was submitted and its card posted through this process, which is the usual case, the
row holds exactly what this process last committed, and that read is a round trip (PostgreSQL) or a
page-cache revalidation (SQLite) on the click's path to the waiting agent. Held here, the check
needs none.

Why a held state never lets a click do what a read would refuse:
- It is exact: the request a commit of this process wrote, at the version that commit left
  (`put`), or that state with its card's ts once this process's guarded ts write matched it
  (`card_stored`: the ts, its time and version + 1, as the write did). Every write of a request's
  state raises its version by one, so a write this process does not know of leaves the row at a
  larger version than the held one, never at the same version with other content.
- The decision is written on the checked version only (`Service.decide(only_on_read=True)`): if
  the row moved on, nothing is written and the click is checked again on the row as the decision
  read it (bot/slack/interactions.py), never decided on a state nobody checked; the held state is
  then dropped.
- A refusal on a held state is not told: the request is read and checked again.

A decision forgets its request (it is no longer pending). At most `cap` requests are held, and
`budget` characters of their agent-given content (parameters and their schema, preview, extra,
items, summary and context, as JSON text; an agent may send 1 MB a request), the oldest dropped
first; a request over a sixteenth of the budget is not held at all (its click reads). So memory
grows neither with the number of pending requests nor with their size (a held object takes a few
times its JSON text).
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime

from bot.domain.json_codec import dumps
from bot.domain.model import Request
from bot.domain.outbox import CardPosted

CAP = 1024
BUDGET = 8 * 1024 * 1024


def weight(request: Request) -> int:
    """About how much of `request` the agent chose: its content as JSON text, in characters."""
    preview = request.preview.data if request.preview is not None else None
    return (len(request.summary) + len(request.context or "")
            + sum(len(dumps(part)) for part in (request.action.params, request.action.params_schema, preview,
                                                request.extra, [item.to_json() for item in request.items]) if part))


class Known:
    def __init__(self, cap: int = CAP, budget: int = BUDGET) -> None:
        self.cap = cap
        self.budget = budget
        self._held: OrderedDict[str, tuple[Request, int]] = OrderedDict()
        self._weight = 0
        self.used = 0  # checks that needed no read (tests look)

    def __len__(self) -> int:
        return len(self._held)

    def put(self, request: Request) -> None:
        """`request` exactly as a commit of this process left it (its version included)."""
        self.forget(request.id)
        size = weight(request)
        if size > self.budget // 16:
            return
        self._held[request.id] = (request, size)
        self._weight += size
        while len(self._held) > self.cap or self._weight > self.budget:
            _, (_, dropped) = self._held.popitem(last=False)
            self._weight -= dropped

    def card_stored(self, card: CardPosted, at: datetime) -> None:
        """This process's guarded ts write stored `card` at `at` (it matched: no card was stored)."""
        found = self._held.get(card.request_id)
        if found is None or found[0].card_ts is not None:
            return
        held, size = found
        self._held[card.request_id] = (held.evolve(card_channel=card.channel, card_ts=card.ts, updated_at=at,
                                                   version=held.version + 1), size)

    def forget(self, request_id: str) -> None:
        found = self._held.pop(request_id, None)
        if found is not None:
            self._weight -= found[1]

    def get(self, request_id: str) -> Request | None:
        found = self._held.get(request_id)
        return found[0] if found is not None else None
