"""The emulated workspace's state: users, user groups, channels, messages and threads, ephemeral
messages, views and App Home, plus the record of every Web API call.

State is plain attributes on one event loop, so tests (and the sandbox page) read and arrange it
directly. Every change calls ``_notify()``, which wakes ``wait_for`` and the page's listeners.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from bot.sandbox.errors import ApiError

TS_BASE = 1_700_000_000
PERMALINK_HOST = "https://fake-slack.test"


@dataclass
class Call:
    """One HTTP request received by the fake, recorded on arrival and completed on answer.

    ``status`` is 0 while the request is still pending (delayed or hung). A hung request
    keeps ``hung=True`` for good; until it is released ``ok`` is False (no answer
    reached the caller) and ``response`` holds the withheld answer if the effect was
    applied (``{}`` otherwise). Once released, ``status``/``ok``/``response`` describe
    the answer that was finally sent.
    """

    method: str
    args: dict[str, Any]
    http_method: str
    token: str | None
    status: int = 0
    ok: bool = False
    response: dict[str, Any] = field(default_factory=dict)
    at: float = 0.0
    hung: bool = False

    @property
    def error(self) -> str | None:
        """The Slack error code of the answer, if any."""
        err = self.response.get("error")
        return err if isinstance(err, str) else None


@dataclass
class MessageVersion:
    """A message's content before one chat.update."""

    text: str
    blocks: list[dict[str, Any]]
    metadata: dict[str, Any] | None
    attachments: list[dict[str, Any]] | None


@dataclass
class Message:
    """A message stored by the fake. ``thread_ts`` is None for top-level messages."""

    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    metadata: dict[str, Any] | None
    thread_ts: str | None
    user: str
    update_count: int = 0
    history: list[MessageVersion] = field(default_factory=list)
    attachments: list[dict[str, Any]] | None = None
    bot_id: str | None = None


def ts_key(ts: str) -> tuple[int, int]:
    sec, _, frac = str(ts).partition(".")
    return int(sec or 0), int((frac or "0")[:6].ljust(6, "0"))


def encode_cursor(ts: str) -> str:
    return base64.b64encode(f"next_ts:{ts}".encode()).decode()


def decode_cursor(cursor: str) -> str:
    try:
        raw = base64.b64decode(cursor.encode(), validate=True).decode()
    except ValueError:
        raise ApiError("invalid_cursor") from None
    if not raw.startswith("next_ts:"):
        raise ApiError("invalid_cursor")
    return raw[len("next_ts:"):]


class MessageStore(dict[tuple[str, str], Message]):
    """Messages by (channel, ts), indexed by (channel, thread_ts) as they are stored: a thread's replies
    (and a channel's top-level messages) are found without scanning every message, so each post or
    update in a workspace of thousands of messages costs the same as in an empty one."""

    def __init__(self) -> None:
        super().__init__()
        self.groups: dict[tuple[str, str | None], dict[str, Message]] = {}

    def __setitem__(self, key: tuple[str, str], msg: Message) -> None:
        old = self.get(key)
        if old is not None:
            self._drop(key, old)
        super().__setitem__(key, msg)
        self.groups.setdefault((msg.channel, msg.thread_ts), {})[key[1]] = msg

    def __delitem__(self, key: tuple[str, str]) -> None:
        self._drop(key, self[key])
        super().__delitem__(key)

    def _drop(self, key: tuple[str, str], msg: Message) -> None:
        group = self.groups.get((msg.channel, msg.thread_ts))
        if group is not None:
            group.pop(key[1], None)

    def pop(self, *args: Any) -> Any:
        raise NotImplementedError("del messages[key] keeps the index")

    def clear(self) -> None:
        super().clear()
        self.groups.clear()


class Workspace:
    """The state of one emulated workspace; the Web API method mixins work on it."""

    def __init__(self, *, bot_token: str = "xoxb-test", bot_user_id: str = "UBOT", team_id: str = "T1") -> None:
        self.bot_token = bot_token
        self.bot_user_id = bot_user_id
        self.bot_id = "BBOT"
        self.app_id = "A1"
        self.team_id = team_id
        self.url = ""
        self.calls: list[Call] = []
        self.messages = MessageStore()
        self.ephemerals: list[dict[str, Any]] = []
        self.views: dict[str, dict[str, Any]] = {}
        self.home_views: dict[str, dict[str, Any]] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self.usergroups: dict[str, dict[str, Any]] = {}
        self.channels: dict[str, dict[str, Any]] = {}
        # Slack answers channel_not_found for ids it does not know; off, any id is a channel (older tests).
        self.known_channels_only = True
        self.scopes: set[str] | None = None  # the bot's granted scopes; None: every method is allowed
        self.listeners: list[Callable[[], None]] = []  # called on every change (the sandbox page)
        # Messages' blocks are parsed with slack_sdk's models on every call (1). The benchmarks set N:
        # the first N calls and every Nth after are, the rest only counted (the fake runs beside the
        # server being measured, and the parse is most of its CPU); 0: none is (bench.instructions,
        # whose count must be the same for every approval).
        self.block_check_every = 1
        self._block_checks = 0
        self._ts_counter = 0
        self._view_counter = 0
        self._used_triggers: set[str] = set()
        self._changed = asyncio.Event()
        self.add_user(bot_user_id, "signoff", "Signoff", is_bot=True)

    def changed(self) -> None:
        """Tell waiters and listeners that the state changed (after arranging it directly)."""
        self._notify()

    def add_ephemeral(self, channel: str, user: str, text: str, blocks: list[dict[str, Any]] | None = None,
                      *, thread_ts: str | None = None) -> str:
        """Store a message only ``user`` sees, as chat.postEphemeral does; returns its ts."""
        ts = self._next_ts()
        self.ephemerals.append({"channel": channel, "user": user, "text": text, "blocks": blocks or [],
                                "thread_ts": thread_ts, "ts": ts})
        self._notify()
        return ts

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        for listener in list(self.listeners):
            listener()

    # ------------------------------------------------------------------ arrange

    def add_user(
        self, user_id: str, name: str, real_name: str | None = None, *, is_bot: bool = False, tz: str = "UTC"
    ) -> None:
        """Register a user for users.info (and as a DM target)."""
        real = real_name if real_name is not None else name
        offset = ZoneInfo(tz).utcoffset(dt.datetime(2024, 1, 1))
        self.users[user_id] = {
            "id": user_id,
            "team_id": self.team_id,
            "name": name,
            "real_name": real,
            "deleted": False,
            "tz": tz,
            "tz_offset": int(offset.total_seconds()) if offset is not None else 0,
            "is_bot": is_bot,
            "is_app_user": False,
            "profile": {"real_name": real, "display_name": name, "real_name_normalized": real},
        }

    def add_usergroup(self, group_id: str, user_ids: list[str], handle: str | None = None) -> None:
        """Register a user group (``S...``) with its members."""
        handle = handle or group_id.lower()
        self.usergroups[group_id] = {
            "id": group_id,
            "team_id": self.team_id,
            "handle": handle,
            "name": handle,
            "users": list(user_ids),
        }

    def add_channel(self, channel_id: str, name: str, members: list[str] | None = None, *,
                    bot_member: bool = True, private: bool = False) -> None:
        """Register a channel for conversations.info/members and name lookup.

        ``bot_member=False``: the bot can still post there (chat:write.public) but, as in Slack,
        conversations.history/replies answer ``not_in_channel`` until it joins (conversations.join,
        public channels only).
        """
        self.channels[channel_id] = {"id": channel_id, "name": name, "members": list(members or []),
                                     "bot_member": bot_member, "private": private}

    def add_message(self, channel: str, user: str, text: str, *, thread_ts: str | None = None) -> Message:
        """Store a message written by a human (it cannot be updated by the bot)."""
        msg = Message(channel, self._next_ts(), text, [], None, thread_ts, user)
        self.messages[(channel, msg.ts)] = msg
        return msg

    def channel_messages(self, channel: str, *, thread_ts: str | None = None) -> list[Message]:
        """Oldest first: top-level messages of ``channel``, or only the replies of ``thread_ts``."""
        found = self.messages.groups.get((channel, thread_ts), {}).values()
        return sorted(found, key=lambda m: ts_key(m.ts))


    # ------------------------------------------------------------------ helpers

    def _next_ts(self) -> str:
        # Like Slack: the wall-clock time of the post, in microseconds, unique and increasing.
        self._ts_counter = max(self._ts_counter + 1, int(time.time() * 1_000_000))
        return f"{self._ts_counter // 1_000_000}.{self._ts_counter % 1_000_000:06d}"

    def _resolve_channel(self, channel: Any) -> str:
        """A channel id from an id, a ``#name``, or a user id (their DM), as Slack resolves them.

        With ``known_channels_only`` an id the workspace does not have is ``channel_not_found``:
        DMs (``D`` + a known user) and group DMs (``G``, from conversations.open) always exist.
        """
        if not isinstance(channel, str) or not channel:
            raise ApiError("channel_not_found")
        if channel[0] in "UW" and channel[1:].isalnum():
            return "D" + channel
        name = channel.lstrip("#")
        for info in self.channels.values():
            if info["name"] == name:
                return str(info["id"])
        if self.known_channels_only and channel not in self.channels:
            is_dm = channel.startswith("D") and channel[1:] in self.users
            if not (is_dm or channel.startswith("G")):
                raise ApiError("channel_not_found")
        return channel

    def _require_member(self, channel: str) -> None:
        info = self.channels.get(channel)
        if info is not None and not info.get("bot_member", True):
            raise ApiError("not_in_channel")

    def _require(self, args: dict[str, Any], key: str, error: str = "invalid_arguments") -> str:
        value = args.get(key)
        if not isinstance(value, str) or not value:
            raise ApiError(error, [f"[ERROR] missing required field: {key}"])
        return value

    def _message_json(self, msg: Message, *, include_metadata: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "message", "ts": msg.ts, "text": msg.text, "user": msg.user}
        if msg.bot_id:
            out.update(bot_id=msg.bot_id, app_id=self.app_id)
        if msg.blocks:
            out["blocks"] = msg.blocks
        if msg.attachments:
            out["attachments"] = msg.attachments
        if msg.update_count:
            out["edited"] = {"user": msg.user, "ts": msg.ts}
        if include_metadata and msg.metadata is not None:
            out["metadata"] = msg.metadata
        if msg.thread_ts is not None:
            out["thread_ts"] = msg.thread_ts
            parent = self.messages.get((msg.channel, msg.thread_ts))
            if parent is not None:
                out["parent_user_id"] = parent.user
        else:
            replies = self.channel_messages(msg.channel, thread_ts=msg.ts)
            if replies:
                out.update(
                    thread_ts=msg.ts,
                    reply_count=len(replies),
                    reply_users=sorted({r.user for r in replies}),
                    latest_reply=replies[-1].ts,
                )
        return out

