"""Whether another process marked a waited-on request undelivered (its card refused for good by Slack;
the state is read in bot.domain.delivery_state, written by bot/approvals/delivery_results.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.approvals.reads import Reads
from bot.domain.delivery_state import is_undelivered


def undelivered_check(reads: Reads) -> Callable[[list[str]], Awaitable[list[str]]]:
    """For the SQLite cross-process watcher: which waited-on requests another process marked."""

    async def check(ids: list[str]) -> list[str]:
        found = [await reads.request(i) for i in ids]
        return [r.id for r in found if r is not None and is_undelivered(r)]

    return check
