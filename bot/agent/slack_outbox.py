"""Agent runs in Slack, the outbox side: post the run's root message (then store its ts and let the
run start), update it from the run's latest state, post notes in its thread. A post whose earlier
attempt may have reached Slack looks for our message (by its metadata) first. Also the card renderer
that gives question requests their question cards (an MCP server's form or a run's question).
The listeners are in bot/agent/slack.py."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.agent import blocks
from bot.agent.run_service import RunService
from bot.domain.elicitation import is_elicitation
from bot.domain.model import Kind, Request
from bot.domain.outbox import OutboxItem
from bot.outbox import effects
from bot.outbox.dispatcher import Dead, Done, Result, after_post
from bot.outbox.effects import Handler
from bot.slack import elicit_blocks
from bot.slack.delivery import CardRenderer, SlackCall
from bot.slack.lookup import find_message, has_metadata


class RunDelivery:
    def __init__(self, run_service: RunService, call: SlackCall) -> None:
        self.run_service = run_service
        self.call = call

    def handlers(self) -> dict[str, Handler]:
        return {effects.POST_ROOT: self.post_root, effects.UPDATE_ROOT: self.update_root,
                effects.THREAD_NOTE: self.note}

    async def post_root(self, item: OutboxItem) -> Result:
        run = await self.run_service.find(item.payload["run_id"])
        if run is None:
            return Dead("run no longer exists")
        if run.root_ts:
            self.run_service.kick(run.id)
            return Done()
        if item.uncertain:
            found = await self._find(item.attempts, blocks.RUN_EVENT_TYPE, {"run_id": run.id}, channel=run.channel,
                                     oldest=run.created_at.timestamp() - 60)
            if isinstance(found, str):
                await self.run_service.root_posted(run.id, found)
                return Done()
            if found is not None:
                return found
        message = blocks.root_message(run)
        data, failure = await self.call(
            "chat.postMessage", item.attempts, channel=run.channel, text=message["text"], blocks=message["blocks"],
            metadata={"event_type": blocks.RUN_EVENT_TYPE, "event_payload": {"run_id": run.id}},
            unfurl_links=False, unfurl_media=False,
        )
        if failure is not None:
            if isinstance(failure, Dead):
                await self.run_service.root_failed(run.id, failure.error)
            return failure
        assert data is not None
        await self.run_service.root_posted(run.id, str(data["ts"]))
        return Done()

    async def update_root(self, item: OutboxItem) -> Result:
        run = await self.run_service.find(item.payload["run_id"])
        if run is None:
            return Dead("run no longer exists")
        if not run.root_ts:
            return await self._before_root(run.id)
        message = blocks.root_message(run)
        _, failure = await self.call("chat.update", item.attempts, channel=run.channel, ts=run.root_ts,
                                     text=message["text"], blocks=message["blocks"])
        return failure or Done()

    async def note(self, item: OutboxItem) -> Result:
        run = await self.run_service.find(item.payload["run_id"])
        if run is None:
            return Dead("run no longer exists")
        if not run.root_ts:
            return await self._before_root(run.id)
        key = {"run_id": run.id, "key": item.payload["key"]}
        if item.uncertain:
            found = await self._find(item.attempts, blocks.NOTE_EVENT_TYPE, key, channel=run.channel, ts=run.root_ts)
            if isinstance(found, str):
                return Done()
            if found is not None:
                return found
        message = item.payload["message"]
        _, failure = await self.call(
            "chat.postMessage", item.attempts, channel=run.channel, thread_ts=run.root_ts, text=message["text"],
            blocks=message["blocks"], metadata={"event_type": blocks.NOTE_EVENT_TYPE, "event_payload": key},
            unfurl_links=False, unfurl_media=False,
        )
        return failure or Done()

    async def _before_root(self, run_id: str) -> Result:
        return await after_post(self.run_service.service.reads, run_id, effects.POST_ROOT, "the run's message")

    async def _find(self, attempt: int, event_type: str, payload: dict[str, Any], *, channel: str,
                    ts: str | None = None, oldest: float | None = None) -> str | Result | None:
        """The ts of our message carrying this metadata, if an interrupted attempt posted it."""
        window = {"oldest": f"{oldest:.6f}"} if oldest is not None else {}
        return await find_message(self.call, attempt, has_metadata(event_type, **payload), channel=channel,
                                  thread_ts=ts, **window)


def render_any(render: CardRenderer) -> CardRenderer:
    """Wrap the card renderer so question requests get question cards."""

    def render_card(req: Request, *, now: datetime) -> dict[str, Any]:
        if req.kind is Kind.QUESTION:
            if is_elicitation(req.action.name, req.action.params):  # an MCP server's form (bot/slack/elicit_blocks.py)
                return elicit_blocks.card(req, now=now)
            return blocks.question_card(req, now=now)
        return render(req, now=now)

    return render_card
