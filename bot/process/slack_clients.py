"""The Slack Web API clients of one process, on one shared aiohttp session (TLS connections reused)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiohttp
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.domain.json_codec import dumps, loads
from bot.process.settings import Settings


class FastJsonResponse(aiohttp.ClientResponse):
    """aiohttp's response whose `json()` reads with `json_codec.loads` (slack_sdk calls `json()` plainly)."""

    async def json(self, *, encoding: str | None = None, loads: Callable[[str], Any] = loads,
                   content_type: str | None = "application/json") -> Any:
        return await super().json(encoding=encoding, loads=loads, content_type=content_type)


def slack_session(timeout_seconds: float) -> aiohttp.ClientSession:
    """The session Slack's Web API calls share. They send their arguments (a card's blocks) as JSON and
    get the message back as JSON: orjson writes and reads both (bot/domain/json_codec.py), wherever
    it gives what `json` gives."""
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_seconds), json_serialize=dumps,
                                 response_class=FastJsonResponse)


def slack_client(settings: Settings, session: aiohttp.ClientSession, *, retries: bool) -> AsyncWebClient:
    """A Web API client on the process's shared session, so connections (TLS to Slack) are reused.

    Listener-side clients retry 429s themselves; the outbox's client does not (the outbox reschedules).
    """
    handlers_ = [AsyncConnectionErrorRetryHandler(), AsyncRateLimitErrorRetryHandler(max_retry_count=2)]
    return AsyncWebClient(
        token=settings.slack_bot_token,
        base_url=settings.slack_api_url,
        timeout=int(settings.http_timeout_seconds),
        retry_handlers=handlers_ if retries else [],
        session=session,
    )
