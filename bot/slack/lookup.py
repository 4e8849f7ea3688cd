"""Finding a message an interrupted attempt may already have posted (so a retry never posts twice).

Every message Signoff posts through the outbox carries `metadata`: an event type and a payload
naming what it is. When an outbox item is retried after an attempt that ended without a known
result (the process died mid-call, the connection dropped), its handler looks for that metadata
before posting again: in a thread with conversations.replies, in a channel or DM with
conversations.history. Cards (bot/slack/delivery.py) use the same search.

The bot may post in a public channel it is not a member of (chat:write.public), but Slack will
not let it read that channel's history (`not_in_channel`). Then it joins the channel
(conversations.join, channels:join) and looks again: it needs to be there anyway for thread
replies to reach it. Only if it cannot join is the search given up (and the item posted).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from bot.outbox.dispatcher import Dead, Result, Retry, backoff

NOTICE_EVENT_TYPE = "signoff_notice"
MAX_PAGES = 20  # 20 pages of 200 messages: far more than one item's crash window


class Call(Protocol):
    """bot.slack.delivery.SlackCall: one Web API call, failures turned into outbox Results."""

    async def __call__(
        self, method: str, attempt: int, **kwargs: Any
    ) -> tuple[dict[str, Any] | None, Result | None]: ...


def notice_metadata(request_id: str, key: str) -> dict[str, Any]:
    """The metadata of a notice (reminder, escalation, DM): `key` is its outbox dedupe key."""
    return {"event_type": NOTICE_EVENT_TYPE, "event_payload": {"request_id": request_id, "key": key}}


def has_metadata(event_type: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    """Matches a message whose metadata has this event type and these payload fields."""

    def match(message: dict[str, Any]) -> bool:
        meta = message.get("metadata") or {}
        payload = meta.get("event_payload") or {}
        return meta.get("event_type") == event_type and all(payload.get(k) == v for k, v in fields.items())

    return match


def is_notice(key: str) -> Callable[[dict[str, Any]], bool]:
    return has_metadata(NOTICE_EVENT_TYPE, key=key)


async def find_message(
    call: Call,
    attempt: int,
    match: Callable[[dict[str, Any]], bool],
    *,
    channel: str,
    thread_ts: str | None = None,
    **window: Any,
) -> str | Result | None:
    """The ts of the first message in `channel` (or in the thread `thread_ts`) that `match`es.

    None: not there (posting is safe). A Result: we could not look (the caller should retry
    rather than risk a duplicate); a definite refusal to let us look (Dead) reads as None,
    since waiting would not change it.
    """
    method = "conversations.replies" if thread_ts else "conversations.history"
    cursor = None
    joined = False
    for _ in range(MAX_PAGES):
        kwargs: dict[str, Any] = {"channel": channel, "limit": 200, "include_all_metadata": True, **window}
        if thread_ts:
            kwargs["ts"] = thread_ts
        if cursor:
            kwargs["cursor"] = cursor
        data, failure = await call(method, attempt, **kwargs)
        if isinstance(failure, Dead) and failure.error.endswith("not_in_channel") and not joined:
            joined = True
            _, refused = await call("conversations.join", attempt, channel=channel)
            if refused is None:
                data, failure = await call(method, attempt, **kwargs)
                if isinstance(failure, Dead):  # joined, yet still not allowed to look: Slack has not caught up
                    return Retry(backoff(attempt), f"{failure.error} after joining {channel}")
            elif not isinstance(refused, Dead):
                return refused  # could not ask now: retry later rather than risk a duplicate
        if failure is not None:
            return None if isinstance(failure, Dead) else failure
        assert data is not None
        for message in data.get("messages", []):
            if match(message):
                return str(message["ts"])
        cursor = (data.get("response_metadata") or {}).get("next_cursor")
        if not data.get("has_more") or not cursor:
            return None
    return None
