"""Outbox handlers of the similar-requests card (bot/approvals/similar.py): post it once, update it.

Both render the card from its requests' state at delivery time (bot/slack/similar_cards.py), so a late or
repeated delivery shows the latest truth. The stored ts is the proof the card exists; a post retried after
an attempt with no known result looks for the card's metadata in the channel before posting again. An
update waits behind its card's post (delivered in order: `ordered_by` is the card).
"""

from __future__ import annotations

from bot.approvals.reads import Reads
from bot.approvals.similar import SimilarRequests
from bot.domain.outbox import OutboxItem
from bot.outbox import effects
from bot.outbox.dispatcher import Dead, Done, Result, after_post
from bot.slack.delivery import SlackCall
from bot.slack.lookup import find_message, has_metadata
from bot.slack.similar_cards import EVENT_TYPE, similar_message


class SimilarDelivery:
    def __init__(self, similar: SimilarRequests, reads: Reads, call: SlackCall) -> None:
        self.similar = similar
        self.reads = reads
        self.call = call

    def handlers(self) -> dict[str, effects.Handler]:
        return {effects.SIMILAR_POST: self.post, effects.SIMILAR_UPDATE: self.update}

    async def post(self, item: OutboxItem) -> Result:
        card = await self.similar.card(str(item.payload["card_id"]))
        if card is None:
            return Dead("similar card no longer exists")
        if card.ts:
            return Done()
        if item.uncertain:
            found = await find_message(self.call, item.attempts, has_metadata(EVENT_TYPE, card_id=card.id),
                                       channel=card.channel)
            if isinstance(found, str):
                return Done(apply=self.similar.posted(card.id, found))
            if found is not None:
                return found
        message = similar_message(await self.similar.digest(card))
        data, failure = await self.call("chat.postMessage", item.attempts, channel=card.channel, text=message["text"],
                                        blocks=message["blocks"], unfurl_links=False, unfurl_media=False,
                                        metadata={"event_type": EVENT_TYPE, "event_payload": {"card_id": card.id}})
        if failure is not None:
            return failure
        assert data is not None
        return Done(apply=self.similar.posted(card.id, str(data["ts"])))

    async def update(self, item: OutboxItem) -> Result:
        card = await self.similar.card(str(item.payload["card_id"]))
        if card is None:
            return Dead("similar card no longer exists")
        if not card.ts:
            return await after_post(self.reads, card.id, effects.SIMILAR_POST, "similar card")
        message = similar_message(await self.similar.digest(card))
        _, failure = await self.call("chat.update", item.attempts, channel=card.channel, ts=card.ts,
                                     text=message["text"], blocks=message["blocks"])
        return failure if failure is not None else Done()
