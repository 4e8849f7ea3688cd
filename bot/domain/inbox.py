"""One person's App Home lists: what waits for them, what was escalated to them, what they decided.
Read by the store in one go (`Store.inbox`), rendered by bot/slack/home.py."""

from __future__ import annotations

from dataclasses import dataclass

from bot.domain.model import Request


@dataclass(frozen=True)
class InboxEntry:
    """A pending request in someone's inbox; `can_decide`: they are one of its approvers."""

    request: Request
    can_decide: bool


@dataclass(frozen=True)
class Inbox:
    """One person's App Home lists: each the first `limit` items, plus how many there are in all."""

    waiting: tuple[InboxEntry, ...] = ()
    waiting_total: int = 0
    escalated: tuple[InboxEntry, ...] = ()
    escalated_total: int = 0
    decided: tuple[Request, ...] = ()
    decided_total: int = 0
