"""Who is in which Slack user group, over the Web API, cached with a short TTL.

One lookup per group at a time, whoever asks: it runs as a task of its own, so a caller that stops
waiting (a bound before an ack, a cancelled listener) neither cancels it for the others waiting on
it nor loses its answer for the cache. A failed lookup (Slack's error, no answer) is remembered for
`FAILURE_SECONDS`: the clicks of a burst, and a click's check and its re-check on a fresh read
(bot/slack/interactions.py), ask Slack once between them instead of once each, while it is down.
"""

from __future__ import annotations

import asyncio
import time

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

TTL_SECONDS = 300.0
FAILURE_SECONDS = 2.0


class SlackDirectory:
    def __init__(self, client: AsyncWebClient, *, ttl: float = TTL_SECONDS,
                 failure_ttl: float = FAILURE_SECONDS) -> None:
        self.client = client
        self.ttl = ttl
        self.failure_ttl = failure_ttl
        self._groups: dict[str, tuple[float, frozenset[str]]] = {}
        self._failed: dict[str, tuple[float, BaseException]] = {}
        self._inflight: dict[str, asyncio.Task[frozenset[str]]] = {}

    async def group_members(self, group_id: str) -> frozenset[str]:
        """Members of a user group; LookupError if Slack does not know it; Slack's error if it failed."""
        now = time.monotonic()
        cached = self._groups.get(group_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        failed = self._failed.get(group_id)
        if failed is not None and failed[0] > now:
            # The same error each time, without the frames of every earlier raise piled on its traceback
            raise failed[1].with_traceback(None)
        task = self._inflight.get(group_id)
        if task is None:
            task = self._inflight[group_id] = asyncio.create_task(self._lookup(group_id))
            # Retrieved even when every caller stopped waiting before it failed (a bound before an ack)
            task.add_done_callback(lambda done: done.cancelled() or done.exception())
        return await asyncio.shield(task)

    async def _lookup(self, group_id: str) -> frozenset[str]:
        try:
            members = await self._fetch(group_id)
        except Exception as exc:
            now = time.monotonic()
            if len(self._failed) >= 64:  # groups that failed long ago (or never existed): forgotten
                self._failed = {g: f for g, f in self._failed.items() if f[0] > now}
            self._failed[group_id] = (now + self.failure_ttl, exc)
            raise
        else:
            self._groups[group_id] = (time.monotonic() + self.ttl, members)
            self._failed.pop(group_id, None)
            return members
        finally:
            del self._inflight[group_id]

    async def _fetch(self, group_id: str) -> frozenset[str]:
        try:
            response = await self.client.usergroups_users_list(usergroup=group_id)
        except SlackApiError as exc:
            if exc.response.get("error") in ("no_such_subteam", "subteam_not_found", "invalid_usergroup"):
                raise LookupError(f"unknown user group {group_id}") from None
            raise
        return frozenset(response.get("users") or [])

    async def close(self) -> None:
        """Stop lookups still running (at shutdown: nobody waits for them any more)."""
        for task in list(self._inflight.values()):
            task.cancel()
        await asyncio.gather(*self._inflight.values(), return_exceptions=True)
