"""Who is in which Slack user group, over the Web API, cached with a short TTL."""

from __future__ import annotations

import asyncio
import time

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

TTL_SECONDS = 300.0


class SlackDirectory:
    def __init__(self, client: AsyncWebClient, *, ttl: float = TTL_SECONDS) -> None:
        self.client = client
        self.ttl = ttl
        self._groups: dict[str, tuple[float, frozenset[str]]] = {}
        self._inflight: dict[str, asyncio.Future[frozenset[str]]] = {}

    async def group_members(self, group_id: str) -> frozenset[str]:
        cached = self._groups.get(group_id)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        pending = self._inflight.get(group_id)
        if pending is not None:  # 50 people click at once: ask Slack once
            return await asyncio.shield(pending)
        future: asyncio.Future[frozenset[str]] = asyncio.get_running_loop().create_future()
        self._inflight[group_id] = future
        try:
            members = await self._fetch(group_id)
            self._groups[group_id] = (time.monotonic() + self.ttl, members)
            future.set_result(members)
            return members
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: nobody else may be waiting
            raise
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
