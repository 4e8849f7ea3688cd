"""What a person does and sees around the undo window (policy `undo: 30s`): the policy of docs/policy.md, the card's
text and buttons, an Undo click, the request's audit rows."""

from __future__ import annotations

import json
from typing import Any

from bot.sandbox import SlackEmulator
from tests.support.app import App
from tests.support.docs import fenced, page

POLICY = fenced(page("docs/policy.md"), "yaml", after="**Undo window.**")  # tiers: {high: {undo: 30s}}


def card_text(slack: SlackEmulator, app: App, channel: str, ts: str) -> str:
    return json.dumps(slack.messages[(channel, ts)].blocks)


def buttons(slack: SlackEmulator, channel: str, ts: str) -> list[str]:
    return [e["action_id"] for b in slack.messages[(channel, ts)].blocks if b["type"] == "actions"
            for e in b["elements"]]


async def undo_click(app: App, request_id: str, user: str) -> Any:
    card = await app.card(request_id)
    return await app.slack_client.block_action(user=user, action_id="signoff_undo", value=request_id,
                                               block_id="held", channel=card.channel, message_ts=card.ts)


async def audit(app: App, request_id: str) -> list[str]:
    assert app.signoff is not None
    return [e.type for e in await app.signoff.store.audit_events(request_id)]
