"""Similar pending requests, together: which requests in a channel one digest card may offer to decide at once.

Requests are alike when they call the same tool in the same channel with the same parameter names, and
their values differ only where a grant's match could allow (`bot.domain.grants.generalise`): an e-mail
address within one domain, any other text; every other value (a number, a list, an object) equal. Only
requests a plain Approve could decide are grouped: pending approvals with a card, not batches, never
critical, never asking to type a confirmation. A group is offered from `min_size` requests; it lists at
most MAX_GROUP of them (the oldest first), so its card's buttons can carry their ids.

A group's card (`Card`) follows its requests: `plan` adds alike requests that arrive later to the open
card of their shape (up to MAX_GROUP; a request is on one card at most, ever), and `Digest` is what the
card shows now: the requests still pending (its buttons act on those only), a tally of how the others
ended, and, once none is pending, the final tally and no buttons. `Digest.state` names what it shows, so
an update is enqueued once per change, whoever notices it (bot/approvals/similar.py).

Pure. Deciding a group is each request's own decision (bot/slack/similar_handlers.py): the same per-request
outcome, separation of duties and quorum as a click on its card.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bot.domain.grants import agent_of, email_domain
from bot.domain.model import Kind, Request, Risk

__all__ = ["MAX_GROUP", "Card", "Digest", "Group", "Plan", "alike_key", "card_id", "groups", "plan", "state_of"]

Shape = tuple[tuple[str, str, str], ...]

MAX_GROUP = 50


def alike_key(request: Request) -> tuple[Any, ...] | None:
    """What requests alike share (None: it is never grouped)."""
    if (request.kind is not Kind.APPROVAL or request.items or request.risk is Risk.CRITICAL or request.confirm
            or not request.is_pending or not request.card_ts):
        return None
    shape = []
    for name, value in sorted(request.action.params.items()):
        domain = email_domain(value)
        if domain is not None:
            shape.append((name, "domain", domain))
        elif isinstance(value, str):
            shape.append((name, "any", ""))
        else:
            shape.append((name, "eq", json.dumps(value, sort_keys=True, default=str)))
    return (request.channel, request.action.name, tuple(shape))


@dataclass(frozen=True)
class Group:
    channel: str
    tool: str
    shape: tuple[tuple[str, str, str], ...]
    ids: tuple[str, ...]  # the oldest first, at most MAX_GROUP
    total: int  # how many are alike (ids lists the first MAX_GROUP)
    agents: int  # how many different agents asked

    @property
    def key(self) -> str:
        """Its channel and shape, as the card's dedupe key begins (bot/approvals/similar.py adds the day)."""
        digest = hashlib.sha256(json.dumps([self.tool, self.shape]).encode()).hexdigest()[:16]
        return f"similar:{self.channel}:{digest}"

    def where(self) -> str:
        """How they differ, in words: "to: any address at @example.com, subject: any text"."""
        return where(self.shape)

    def title(self) -> str:
        return title(self.total, self.tool, self.agents)


def where(shape: Shape) -> str:
    parts = []
    for name, how, value in shape:
        if how == "domain":
            parts.append(f"{name}: any address at @{value}")
        elif how == "any":
            parts.append(f"{name}: any text")
        else:
            parts.append(f"{name} = {value}")
    return ", ".join(parts)


def title(total: int, tool: str, agents: int) -> str:
    return f"{total} similar {tool} requests from {agents} agent{'s' if agents != 1 else ''}"


def groups(requests: Iterable[Request], min_size: int) -> list[Group]:
    """The groups of at least `min_size` alike pending requests, largest first."""
    found: dict[tuple[Any, ...], list[Request]] = {}
    for request in requests:
        key = alike_key(request)
        if key is not None:
            found.setdefault(key, []).append(request)
    out = []
    for (channel, tool, shape), members in found.items():
        if len(members) < max(2, min_size):
            continue
        members.sort(key=lambda r: (r.created_at, r.id))
        agents = {agent_of(r.extra) or r.requested_by or "" for r in members}
        out.append(Group(channel, tool, shape, tuple(r.id for r in members[:MAX_GROUP]), len(members), len(agents)))
    return sorted(out, key=lambda g: (-g.total, g.channel, g.tool, g.ids[0]))


# -- a group's card, as it follows its requests ---------------------------------------------------------------


def card_id(group: Group) -> str:
    """The id of the card a group gets: deterministic in its channel, its shape and its oldest request, so
    replicas grouping the same requests make one card."""
    return "sim_" + hashlib.sha256(f"{group.key}|{group.ids[0]}".encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Card:
    id: str
    channel: str
    tool: str
    shape: Shape
    members: tuple[str, ...]  # its requests' ids, in the order they joined (the oldest first)
    state: str  # what its last enqueued message shows (`Digest.state`)
    ts: str | None = None
    closed: bool = False  # nothing left pending: its final tally is enqueued

    @property
    def alike(self) -> tuple[Any, ...]:
        """The `alike_key` of the requests it holds."""
        return (self.channel, self.tool, self.shape)


@dataclass(frozen=True)
class Plan:
    joins: dict[str, tuple[str, ...]]  # card id -> alike pending requests to add to that open card
    new: list[Group]  # groups of requests on no card, each to get a card of its own


def plan(requests: Iterable[Request], cards: Iterable[Card], min_size: int) -> Plan:
    """What a sweep does: alike pending requests on no card join the open card of their shape while it has
    room (MAX_GROUP); those left over form new groups as `groups` does."""
    cards = list(cards)
    on_card = {rid for card in cards for rid in card.members}
    room: dict[tuple[Any, ...], list[Any]] = {}  # alike key -> [card, how many it may still take]
    for card in cards:
        if not card.closed and len(card.members) < MAX_GROUP:
            room.setdefault(card.alike, [card, MAX_GROUP - len(card.members)])
    joins: dict[str, list[str]] = {}
    rest = []
    for request in sorted(requests, key=lambda r: (r.created_at, r.id)):
        if request.id in on_card:
            continue
        key = alike_key(request)
        if key is None:
            continue
        open_card = room.get(key)
        if open_card is not None and open_card[1] > 0:
            joins.setdefault(open_card[0].id, []).append(request.id)
            open_card[1] -= 1
        else:
            rest.append(request)
    return Plan({k: tuple(v) for k, v in joins.items()}, groups(rest, min_size))


def state_of(statuses: Iterable[tuple[str, str]]) -> str:
    """What a card shows, named: its requests and the status of each (a change in either is a new state)."""
    return hashlib.sha256(json.dumps(sorted(statuses)).encode()).hexdigest()[:32]


ENDINGS = (("approved", "approved"), ("rejected", "rejected"), ("expired", "expired"), ("cancelled", "cancelled"),
           ("answered", "answered"))


@dataclass(frozen=True)
class Digest:
    """What a card shows now: its requests as they are (those gone from the store left out)."""

    card: Card
    requests: tuple[Request, ...]  # in the card's order

    @property
    def pending(self) -> tuple[Request, ...]:
        return tuple(r for r in self.requests if r.is_pending)

    @property
    def agents(self) -> int:
        return len({agent_of(r.extra) or r.requested_by or "" for r in self.requests})

    @property
    def state(self) -> str:
        return state_of((r.id, r.status.value) for r in self.requests)

    def title(self) -> str:
        return title(len(self.requests), self.card.tool, self.agents)

    def tally(self) -> str:
        """How the decided ones ended: "9 approved, 2 rejected, 1 expired" ("" when none is decided)."""
        counts = [(sum(r.status.value == status for r in self.requests), word) for status, word in ENDINGS]
        return ", ".join(f"{n} {word}" for n, word in counts if n)
