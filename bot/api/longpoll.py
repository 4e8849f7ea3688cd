"""Caps on concurrent long-polls (`GET /api/v1/...?wait=N`): per API token and for the whole process.

Each long-poll holds a connection and a waiter for up to a minute; without a cap one token could
hold thousands. Past a cap the request is answered at once with 429 and `Retry-After`, and holds
nothing. A poll without `wait` (or `wait=0`) is never limited: it returns at once anyway.

    SIGNOFF_LONGPOLL_PER_TOKEN   concurrent long-polls one token may hold (default 100)
    SIGNOFF_LONGPOLL_MAX         concurrent long-polls in one process (default 2000)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable

from aiohttp import web

RETRY_AFTER_SECONDS = 1


class LongPollLimits:
    def __init__(self, per_token: int, total: int) -> None:
        self.per_token = per_token
        self.total = total
        self.active: Counter[str] = Counter()

    @property
    def held(self) -> int:
        return sum(self.active.values())

    def refusal(self, token: str) -> str | None:
        if self.held >= self.total:
            return f"this server holds its maximum of {self.total} long-polls; retry shortly"
        if self.active[token] >= self.per_token:
            return f"this token holds its maximum of {self.per_token} concurrent long-polls; retry shortly"
        return None


LIMITS = web.AppKey("longpoll_limits", LongPollLimits)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _waits(request: web.Request) -> bool:
    raw = request.query.get("wait")
    if request.method != "GET" or raw is None:
        return False
    try:
        return float(raw) > 0
    except ValueError:
        return False  # the route answers 400 for it


@web.middleware
async def cap_long_polls(request: web.Request, handler: Handler) -> web.StreamResponse:
    """After bearer_auth: only authenticated requests get here with a token to count against."""
    if not request.path.startswith("/api/") or not _waits(request):
        return await handler(request)
    limits = request.app[LIMITS]
    token = request.headers.get("Authorization", "").partition(" ")[2].strip()
    refusal = limits.refusal(token)
    if refusal is not None:
        response = web.json_response({"error": {"code": "too_many_long_polls", "message": refusal}}, status=429)
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    limits.active[token] += 1
    try:
        return await handler(request)
    finally:
        limits.active[token] -= 1
        if not limits.active[token]:
            del limits.active[token]
