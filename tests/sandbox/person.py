"""A person deciding cards on a running `signoff demo` through the page's own HTTP endpoints, as its
script does: `/sandbox/pane` to see their view (the page's HTML), `/sandbox/act` to click a button or
submit a modal. No browser; what it clicks is what the page shows (the card's own button values)."""

from __future__ import annotations

import html
import json
import re
import time
import urllib.parse
import urllib.request
from typing import Any

ARTICLE = re.compile(r'<article class="msg" data-channel="([^"]+)" data-ts="([^"]+)">(.*?)</article>', re.S)
VIEW = re.compile(r'<form class="modal" data-view="([^"]+)"')


class SandboxPerson:
    """One of the sandbox's people (Alice Approver by default) looking at one channel."""

    def __init__(self, url: str, user: str = "UALICE", channel: str = "CAPPROVALS") -> None:
        self.url, self.user, self.channel = url, user, channel

    def pane(self) -> dict[str, Any]:
        query = urllib.parse.urlencode({"user": self.user, "channel": self.channel})
        with urllib.request.urlopen(f"{self.url}/sandbox/pane?{query}", timeout=10) as resp:
            answer: dict[str, Any] = json.loads(resp.read())
        return answer

    def act(self, **act: Any) -> dict[str, Any]:
        request = urllib.request.Request(self.url + "/sandbox/act", data=json.dumps({"user": self.user, **act}).encode(),
                                         method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as resp:
            answer: dict[str, Any] = json.loads(resp.read())
        assert not answer.get("error") and answer.get("status", 200) == 200, answer
        return answer

    def card(self, request_id: str, timeout: float = 20.0) -> tuple[str, str, str]:
        """(channel, ts, html) of the message whose buttons decide `request_id`, once the page shows it."""
        deadline = time.monotonic() + timeout
        while True:
            for channel, ts, body in ARTICLE.findall(self.pane()["main"]):
                if f'data-value="{request_id}"' in body:
                    return html.unescape(channel), html.unescape(ts), body
            assert time.monotonic() < deadline, f"no card for {request_id} in {self.channel}"
            time.sleep(0.05)  # test-side: the card is posted by the server's outbox, soon after the submit

    def click(self, request_id: str, action: str, block: str = "decide", raw: dict[str, Any] | None = None) -> None:
        channel, ts, body = self.card(request_id)
        assert f'data-action="{action}"' in body, f"the card of {request_id} shows no {action}"
        self.act(kind="action", channel=channel, ts=ts, action_id=action, block_id=block, value=request_id,
                 raw=raw or {})

    def modal(self, timeout: float = 20.0) -> str:
        """The id of the modal the page shows this person, once the bot has opened it (after its ack)."""
        deadline = time.monotonic() + timeout
        while not (found := VIEW.search(self.pane()["modal"] or "")):
            assert time.monotonic() < deadline, "no modal opened"
            time.sleep(0.05)  # test-side: views.open comes from the bot's listener, after the click's ack
        return html.unescape(found.group(1))

    def approve(self, request_id: str) -> None:
        self.click(request_id, "signoff_approve")

    def reject(self, request_id: str, reason: str) -> None:
        """Reject, then type the reason in the modal the page opens and submit it."""
        self.click(request_id, "signoff_reject")
        self.act(kind="submit", view_id=self.modal(), raw={"reason": {"value": reason}})

    def approve_selected(self, request_id: str, ticked: list[int]) -> None:
        """On a batch card: tick these actions and click Approve selected (the others are rejected)."""
        raw = {f"item:{i}": {"signoff_item_pick": ["approve"]} for i in ticked}
        self.click(request_id, "signoff_batch_approve", block="batch:0", raw=raw)
