"""Accept / Dismiss on a suggestion from the decision record (App Home, the weekly digest).

Thin: ack, read who clicked (the signed request's user id, never a value in the payload) and the
suggestion's key, and hand both to bot.approvals.history.HistorySuggestions, which re-reads the record
and decides. The person is told the outcome (ephemeral in the digest's channel, a DM from Home), and
their Home is republished so an accepted or dismissed suggestion leaves it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncApp

from bot.approvals.history import Accepted, HistorySuggestions
from bot.slack.history_cards import ACCEPT, DISMISS, accepted_text
from bot.slack.interactions import Interactions
from bot.slack.payloads import BadPayload, user_of
from bot.slack.text import groups_unknown_text

if TYPE_CHECKING:
    from bot.slack.home import Home


class HistoryInteractions:
    def __init__(self, interactions: Interactions, suggestions: HistorySuggestions, home: Home | None = None) -> None:
        self.interactions = interactions
        self.suggestions = suggestions
        self.home = home

    async def accept(self, user: str, key: str) -> str:
        result = await self.suggestions.accept(user, key)
        if isinstance(result, Accepted):
            return accepted_text(result.grant, result.made, user, self.suggestions.grant_days)
        if result.groups is not None:
            return groups_unknown_text(result.groups, "acceptance")
        return result.text

    async def dismiss(self, user: str, key: str) -> str:
        await self.suggestions.dismiss(user, key)
        return "Dismissed: this suggestion no longer shows on your Home tab. Nothing else was changed."

    async def clicked(self, body: dict[str, Any]) -> None:
        try:
            user, _ = user_of(body)
        except BadPayload:
            return
        action = (body.get("actions") or [{}])[0]
        key = action.get("value")
        channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
        if not isinstance(key, str) or not key:
            await self.interactions.tell(user, channel, "This button does not name a suggestion. Nothing was changed.")
            return
        text = await (self.accept(user, key) if action.get("action_id") == ACCEPT else self.dismiss(user, key))
        await self.interactions.tell(user, channel, text)
        if self.home is not None:
            await self.home.opened(user)  # republish: an accepted or dismissed suggestion leaves their Home


def register(app: AsyncApp, hi: HistoryInteractions) -> None:
    async def on_click(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        await hi.clicked(body)

    app.action(ACCEPT)(on_click)
    app.action(DISMISS)(on_click)
