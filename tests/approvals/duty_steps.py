"""Shared steps of the issue-12 scenario tests (quorum, duties, confirmation, batches)."""

from __future__ import annotations

import json
from typing import Any


from tests.support.app import App



def ephemerals_to(app: App, user: str) -> list[str]:
    return [c.args["text"] for c in app.slack.calls_to("chat.postEphemeral") if c.args["user"] == user]


async def card_text(app: App, request_id: str) -> str:
    card = await app.card(request_id)
    return json.dumps(app.slack.messages[(card.channel, card.ts)].blocks, ensure_ascii=False)


def has_buttons(app: App, channel: str, ts: str) -> bool:
    return any(b["type"] == "actions" for b in app.slack.messages[(channel, ts)].blocks)
