"""Similar pending requests, together: which requests in a channel one digest card may offer to decide at once.

Requests are alike when they call the same tool in the same channel with the same parameter names, and
their values differ only where a grant's match could allow (`bot.domain.grants.generalise`): an e-mail
address within one domain, any other text; every other value (a number, a list, an object) equal. Only
requests a plain Approve could decide are grouped: pending approvals with a card, not batches, never
critical, never asking to type a confirmation. A group is offered from `min_size` requests; it lists at
most MAX_GROUP of them (the oldest first), so its card's buttons can carry their ids.

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

__all__ = ["MAX_GROUP", "Group", "alike_key", "groups"]

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
        parts = []
        for name, how, value in self.shape:
            if how == "domain":
                parts.append(f"{name}: any address at @{value}")
            elif how == "any":
                parts.append(f"{name}: any text")
            else:
                parts.append(f"{name} = {value}")
        return ", ".join(parts)

    def title(self) -> str:
        agents = f"{self.agents} agent{'s' if self.agents != 1 else ''}"
        return f"{self.total} similar {self.tool} requests from {agents}"


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
