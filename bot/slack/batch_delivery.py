"""Outbox handlers for batch cards: the continuation pages in the card's thread.

The card (page 0) is posted and updated by `CardDelivery` as usual; wrapped here, a batch's
card post also enqueues one post per further page, in the unit that stores the card's ts (the
pages need it as their thread), and a card update also updates every posted page. A page's ts
is stored in the request's `extra["pages"]`; like the card, a page is never posted twice: a
retry after an uncertain attempt looks for the page's metadata in the thread first.
"""

from __future__ import annotations

from bot.outbox import effects
from bot.process.clock import Clock
from bot.domain.batch import page_ts
from bot.outbox.effects import Handler
from bot.outbox.dispatcher import Dead, Done, Result, after_post
from bot.approvals import delivery_results
from bot.approvals.service import Service
from bot.slack.batch_blocks import batch_page, page_count
from bot.slack.delivery import CardDelivery
from bot.slack.lookup import find_message, has_metadata
from bot.domain.outbox import OutboxItem

POST_PAGE = effects.POST_PAGE
PAGE_EVENT_TYPE = "signoff_card_page"


class BatchPages:
    def __init__(self, cards: CardDelivery, service: Service, clock: Clock) -> None:
        self.cards = cards
        self.service = service
        self.clock = clock

    def handlers(self) -> dict[str, Handler]:
        """The card's handlers, wrapped, and the pages' own."""
        return {effects.POST_CARD: self.post, effects.UPDATE_CARD: self.update, effects.POST_PAGE: self.post_page}

    async def post(self, item: OutboxItem) -> Result:
        """The card; for a batch of several pages, the pages' posts join the unit storing its ts."""
        # The one read of this delivery, if the submit's commit left nothing to render (bot/live/just_committed.py).
        request = self.service.fresh.take(item) or await self.service.reads.request(item.payload["request_id"])
        result = await self.cards.post(item, read=request)
        if not isinstance(result, Done) or request is None or not request.is_batch or page_count(request) < 2:
            return result
        return Done(apply=delivery_results.pages_to_post(result.apply, request, page_count(request), self.clock),
                    audit=result.audit, card=result.card)

    async def post_page(self, item: OutboxItem) -> Result:
        request = await self.service.reads.request(item.payload["request_id"])
        page = int(item.payload["page"])
        if request is None:
            return Dead("request no longer exists")
        if page_ts(request, page):
            return Done()
        if not request.has_card:
            return await after_post(self.service.reads, request.id, effects.POST_CARD, "card")
        assert request.card_channel is not None  # has_card
        thread = request.thread_ts or request.card_ts
        if item.uncertain:
            found = await find_message(self.cards.call, item.attempts,
                                       has_metadata(PAGE_EVENT_TYPE, request_id=request.id, page=page),
                                       channel=request.card_channel, thread_ts=thread)
            if isinstance(found, str):
                return Done(apply=delivery_results.page_posted(request.id, page, found, self.clock))
            if found is not None:
                return found
        message = batch_page(request, page, now=self.clock.now())
        data, failure = await self.cards.call(
            "chat.postMessage", item.attempts, channel=request.card_channel, thread_ts=thread,
            text=message["text"], blocks=message["blocks"], unfurl_links=False, unfurl_media=False,
            metadata={"event_type": PAGE_EVENT_TYPE, "event_payload": {"request_id": request.id, "page": page}},
        )
        if failure is not None:
            return failure
        assert data is not None
        return Done(apply=delivery_results.page_posted(request.id, page, str(data["ts"]), self.clock))

    async def update(self, item: OutboxItem) -> Result:
        """The card, then every posted page of a batch (chat.update is safe to repeat)."""
        # One read for the card and its pages (none if the decision's commit left the request with its
        # card's ts, bot/live/just_committed.py): a page ts stored after it enqueues another update anyway.
        request = self.service.fresh.take(item, usable=lambda r: r.has_card) \
            or await self.service.reads.request(item.payload["request_id"])
        result = await self.cards.update(item, read=request)
        if not isinstance(result, Done):
            return result
        if request is None or not request.is_batch or not request.card_channel:
            return result
        now = self.clock.now()
        for page in range(1, page_count(request)):
            ts = page_ts(request, page)
            if ts is None:
                continue  # not posted yet: it is posted from the latest state
            message = batch_page(request, page, now=now)
            _, failure = await self.cards.call("chat.update", item.attempts, channel=request.card_channel, ts=ts,
                                               text=message["text"], blocks=message["blocks"])
            if isinstance(failure, Dead):
                continue  # that page cannot be updated (deleted?): the others still are
            if failure is not None:
                return failure
        return result
