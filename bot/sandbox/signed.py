"""Send the app what Slack itself would send: signed events, interactions and commands.

Payload shapes follow bolt-python's scenario tests and Slack's documentation (see
docs/SLACK_FACTS.md section 1). Interactivity is form-encoded as ``payload=<json>``,
slash commands are plain form fields, Events API envelopes are JSON. Every body is
signed with ``slack_sdk.signature.SignatureVerifier`` exactly as Slack signs it.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp
from slack_sdk.signature import SignatureVerifier

from bot.sandbox.server import SlackEmulator

__all__ = [
    "Response",
    "SlackClient",
    "checkboxes",
    "number_input",
    "plain_input",
    "multi_static_select",
    "radio",
    "static_select",
]

_FORM = "application/x-www-form-urlencoded"
_JSON = "application/json"
_VERIFICATION_TOKEN = "fake-verification-token"


@dataclass
class Response:
    """What the app answered."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    text: str = ""

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.text)


def _option(value: str) -> dict[str, Any]:
    return {"text": {"type": "plain_text", "text": value, "emoji": True}, "value": value}


def plain_input(value: str | None) -> dict[str, Any]:
    """State value of a ``plain_text_input``."""
    return {"type": "plain_text_input", "value": value}


def number_input(value: str | None) -> dict[str, Any]:
    """State value of a ``number_input`` (Slack sends the number as a string)."""
    return {"type": "number_input", "value": value}


def static_select(value: str | None) -> dict[str, Any]:
    """State value of a ``static_select``; None means nothing selected."""
    return {"type": "static_select", "selected_option": _option(value) if value is not None else None}


def checkboxes(values: list[str]) -> dict[str, Any]:
    """State value of ``checkboxes``."""
    return {"type": "checkboxes", "selected_options": [_option(v) for v in values]}


def multi_static_select(values: list[str]) -> dict[str, Any]:
    """State value of a ``multi_static_select``."""
    return {"type": "multi_static_select", "selected_options": [_option(v) for v in values]}


def radio(value: str | None) -> dict[str, Any]:
    """State value of ``radio_buttons``; None means nothing selected."""
    return {"type": "radio_buttons", "selected_option": _option(value) if value is not None else None}


class SlackClient:
    """Posts signed Slack requests to the app under test over real HTTP.

    Pass ``fake`` (a started ``SlackEmulator``) to have ``block_action`` fill in the
    ``message`` and ``view`` objects from what the app actually posted or opened.
    """

    def __init__(
        self,
        app_url: str,
        signing_secret: str,
        *,
        team_id: str = "T1",
        path: str = "/slack/events",
        fake: SlackEmulator | None = None,
        response_url_base: str = "http://127.0.0.1:9/response_url",
    ) -> None:
        self.url = app_url.rstrip("/") + path
        self.signing_secret = signing_secret
        self.team_id = team_id
        self.api_app_id = "A1"
        self.fake = fake
        self.response_url_base = response_url_base
        self._verifier = SignatureVerifier(signing_secret)
        self._session: aiohttp.ClientSession | None = None
        self._counter = itertools.count(1)

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> SlackClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ transport

    def sign(self, body: str | bytes, timestamp: int) -> str:
        """The ``X-Slack-Signature`` Slack would send for ``body`` at ``timestamp``."""
        signature = self._verifier.generate_signature(timestamp=str(timestamp), body=body)
        assert signature is not None
        return signature

    async def post_raw(
        self,
        body: str | bytes,
        *,
        content_type: str,
        timestamp: int | None = None,
        signature: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        """Sign (unless ``signature`` is given) and POST ``body`` as-is."""
        ts = int(time.time()) if timestamp is None else timestamp
        raw = body.encode() if isinstance(body, str) else body
        sent = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": str(ts),
            "X-Slack-Signature": signature if signature is not None else self.sign(raw, ts),
        }
        sent.update(headers or {})
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        async with self._session.post(self.url, data=raw, headers=sent) as resp:
            text = await resp.text()
            return Response(status=resp.status, headers=dict(resp.headers), text=text)

    async def post_payload(self, payload: dict[str, Any], **kwargs: Any) -> Response:
        """Send an interactivity payload form-encoded as ``payload=<json>``."""
        return await self.post_raw(urlencode({"payload": json.dumps(payload)}), content_type=_FORM, **kwargs)

    # ------------------------------------------------------------------ builders

    def _trigger_id(self) -> str:
        return f"{next(self._counter)}.{self.team_id}.{uuid.uuid4().hex[:20]}"

    def _response_url(self, kind: str) -> str:
        return f"{self.response_url_base}/{kind}/{next(self._counter)}"

    def _user(self, user: str, user_name: str | None = None) -> dict[str, Any]:
        name = user_name or user.lower()
        return {"id": user, "username": name, "name": name, "team_id": self.team_id}

    def _team(self) -> dict[str, Any]:
        return {"id": self.team_id, "domain": "fake"}

    def _known_message(self, channel: str | None, message_ts: str | None) -> dict[str, Any] | None:
        if self.fake is None or channel is None or message_ts is None:
            return None
        msg = self.fake.messages.get((channel, message_ts))
        if msg is None:
            return None
        out: dict[str, Any] = {"type": "message", "ts": msg.ts, "text": msg.text, "user": msg.user, "blocks": msg.blocks}
        if msg.bot_id:
            out.update(bot_id=msg.bot_id, app_id=self.api_app_id)
        if msg.thread_ts:
            out["thread_ts"] = msg.thread_ts
        if msg.metadata is not None:
            out["metadata"] = msg.metadata
        return out

    def _view(
        self, view_id: str, *, callback_id: str = "", private_metadata: str = "", values: dict[str, Any] | None = None,
        hash: str | None = None,
    ) -> dict[str, Any]:
        known = self.fake.views.get(view_id) if self.fake is not None else None
        view: dict[str, Any] = {
            "id": view_id,
            "team_id": self.team_id,
            "type": "modal",
            "blocks": [],
            "private_metadata": private_metadata,
            "callback_id": callback_id,
            "external_id": "",
            "title": {"type": "plain_text", "text": "Signoff", "emoji": True},
            "close": None,
            "submit": None,
            "clear_on_close": False,
            "notify_on_close": False,
            "previous_view_id": None,
            "root_view_id": view_id,
            "app_id": self.api_app_id,
            "app_installed_team_id": self.team_id,
            "bot_id": "BBOT",
            "hash": hash or "h1",
        }
        if known is not None:
            view.update(known)
        view["state"] = {"values": values or {}}
        return view

    # ------------------------------------------------------------------ interactivity

    async def block_action(
        self,
        *,
        user: str,
        action_id: str,
        value: str | None = None,
        block_id: str = "actions",
        channel: str | None = None,
        message_ts: str | None = None,
        message: dict[str, Any] | None = None,
        view_id: str | None = None,
        trigger_id: str | None = None,
        state_values: dict[str, Any] | None = None,
        user_name: str | None = None,
    ) -> Response:
        """A button click, on a message (``message_ts``) or in a view (``view_id``)."""
        payload: dict[str, Any] = {
            "type": "block_actions",
            "user": self._user(user, user_name),
            "api_app_id": self.api_app_id,
            "token": _VERIFICATION_TOKEN,
            "trigger_id": trigger_id or self._trigger_id(),
            "team": self._team(),
            "enterprise": None,
            "is_enterprise_install": False,
            "response_url": self._response_url("actions"),
        }
        if view_id is not None:
            payload["container"] = {"type": "view", "view_id": view_id}
            payload["view"] = self._view(view_id, values=state_values)
        elif message_ts is not None:
            payload["container"] = {
                "type": "message",
                "message_ts": message_ts,
                "channel_id": channel,
                "is_ephemeral": False,
            }
        if channel is not None:
            payload["channel"] = {"id": channel, "name": channel.lower()}
        msg = message if message is not None else self._known_message(channel, message_ts)
        if msg is not None:
            payload["message"] = msg
        if view_id is None:
            payload["state"] = {"values": state_values or {}}
        action: dict[str, Any] = {
            "action_id": action_id,
            "block_id": block_id,
            "type": "button",
            "text": {"type": "plain_text", "text": action_id, "emoji": True},
            "action_ts": f"{time.time():.6f}",
        }
        if value is not None:
            action["value"] = value
        payload["actions"] = [action]
        return await self.post_payload(payload)

    async def view_submission(
        self,
        *,
        user: str,
        callback_id: str,
        values: dict[str, Any],
        private_metadata: str = "",
        view_id: str = "V1",
        hash: str = "h1",
        user_name: str | None = None,
    ) -> Response:
        """Submit a modal. ``values`` = ``{block_id: {action_id: plain_input("...")}}``."""
        view = self._view(view_id, callback_id=callback_id, private_metadata=private_metadata, values=values, hash=hash)
        view.update(callback_id=callback_id, private_metadata=private_metadata, hash=hash)
        payload: dict[str, Any] = {
            "type": "view_submission",
            "team": self._team(),
            "user": self._user(user, user_name),
            "api_app_id": self.api_app_id,
            "token": _VERIFICATION_TOKEN,
            "trigger_id": self._trigger_id(),
            "view": view,
            "response_urls": [],
            "enterprise": None,
            "is_enterprise_install": False,
        }
        return await self.post_payload(payload)

    async def view_closed(
        self,
        *,
        user: str,
        callback_id: str,
        private_metadata: str = "",
        view_id: str = "V1",
        is_cleared: bool = False,
    ) -> Response:
        """The user closed a modal opened with ``notify_on_close``."""
        view = self._view(view_id, callback_id=callback_id, private_metadata=private_metadata)
        view.update(callback_id=callback_id, private_metadata=private_metadata)
        payload = {
            "type": "view_closed",
            "team": self._team(),
            "user": self._user(user),
            "api_app_id": self.api_app_id,
            "token": _VERIFICATION_TOKEN,
            "view": view,
            "is_cleared": is_cleared,
            "enterprise": None,
            "is_enterprise_install": False,
        }
        return await self.post_payload(payload)

    # ------------------------------------------------------------------ events & commands

    async def event(
        self,
        event: dict[str, Any],
        *,
        event_id: str | None = None,
        retry_num: int | None = None,
        retry_reason: str = "http_timeout",
    ) -> Response:
        """An Events API ``event_callback`` envelope around ``event``."""
        bot_user_id = self.fake.bot_user_id if self.fake is not None else "UBOT"
        envelope = {
            "token": _VERIFICATION_TOKEN,
            "team_id": self.team_id,
            "api_app_id": self.api_app_id,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev{next(self._counter):08d}{uuid.uuid4().hex[:8].upper()}",
            "event_time": int(time.time()),
            "authorizations": [
                {"enterprise_id": None, "team_id": self.team_id, "user_id": bot_user_id, "is_bot": True}
            ],
            "is_ext_shared_channel": False,
        }
        headers = None
        if retry_num is not None:
            headers = {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": retry_reason}
        return await self.post_raw(json.dumps(envelope), content_type=_JSON, headers=headers)

    async def command(
        self,
        *,
        user: str,
        text: str = "",
        command: str = "/signoff",
        channel: str = "C1",
        trigger_id: str | None = None,
        user_name: str | None = None,
    ) -> Response:
        """A slash command, form-encoded like Slack sends it."""
        form = {
            "token": _VERIFICATION_TOKEN,
            "team_id": self.team_id,
            "team_domain": "fake",
            "channel_id": channel,
            "channel_name": channel.lower(),
            "user_id": user,
            "user_name": user_name or user.lower(),
            "command": command,
            "text": text,
            "api_app_id": self.api_app_id,
            "is_enterprise_install": "false",
            "response_url": self._response_url("commands"),
            "trigger_id": trigger_id or self._trigger_id(),
        }
        return await self.post_raw(urlencode(form), content_type=_FORM)

    async def url_verification(self, challenge: str) -> Response:
        """The handshake Slack sends when the Request URL is saved."""
        body = {"token": _VERIFICATION_TOKEN, "challenge": challenge, "type": "url_verification"}
        return await self.post_raw(json.dumps(body), content_type=_JSON)
