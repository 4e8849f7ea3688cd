"""Where a request's card stands in Slack, as agents see it (`delivery` in the agent API and webhooks).

A card post that Slack refuses for good (bad token, missing scope, channel not found, bot not in
the channel, channel archived) marks the request in `extra["delivery"]` (see bot/approvals/delivery_results.py):
`{"status": "failed", "error", "message", "method", "channel"?, "needed_scope"?, "failed_at"}`. The
request stays `pending` (it can be cancelled; its timeout still ends it), but nobody in Slack sees it,
so a long-poll on it returns at once (`Service.wait`) instead of waiting for nothing.
"""

from __future__ import annotations

from typing import Any

from bot.domain.model import Request

DELIVERY_KEY = "delivery"


def is_undelivered(request: Request) -> bool:
    failed = request.extra.get(DELIVERY_KEY)
    return isinstance(failed, dict) and failed.get("status") == "failed"


def delivery_json(request: Request) -> dict[str, Any]:
    """`posted` (the card is in Slack), `failed` (Slack refused it for good; says why) or `queued`."""
    if request.card_ts:
        return {"status": "posted"}
    if is_undelivered(request):
        return dict(request.extra[DELIVERY_KEY])
    return {"status": "queued"}
