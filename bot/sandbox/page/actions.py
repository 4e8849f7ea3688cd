"""What a person does on the sandbox page, turned into exactly the signed request Slack would send.

Clicks become ``block_actions``, modal submits ``view_submission`` (and closes ``view_closed`` when the
view asked for it), messages become Events API ``message`` events (after the emulator stores them as
the person's), ``/commands`` become slash commands, opening Home an ``app_home_opened`` event. All go
to the bot's own ``/slack/events`` over HTTP, signed with the signing secret, so production code runs.

Modals: Slack ties a modal to the click whose ``trigger_id`` opened it; the page makes each click's
trigger id, remembers whose it was, and finds the views opened (or pushed) with it in the emulator's
call record. A modal's stack lives here: the emulator only stores views.
"""

from __future__ import annotations

import functools
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from bot.sandbox.errors import ApiError
from bot.sandbox.limits import validate_view
from bot.sandbox.page.state_values import state_values
from bot.sandbox.server import SlackEmulator
from bot.sandbox.signed import Response, SlackClient


class BadAction(Exception):
    """The page sent something that names no message, view or person: a 400."""


@dataclass
class Modals:
    """Each person's stack of open views (ids), and the errors Slack shows under their inputs."""

    stacks: dict[str, list[str]] = field(default_factory=dict)
    errors: dict[str, dict[str, str]] = field(default_factory=dict)
    triggers: dict[str, str] = field(default_factory=dict)
    seen_calls: int = 0

    def sync(self, slack: SlackEmulator) -> None:
        """Open what views.open/views.push opened for a trigger this page made, since last time."""
        for call in slack.calls[self.seen_calls:]:
            if call.method in ("views.open", "views.push") and call.ok:
                user = self.triggers.get(str(call.args.get("trigger_id")))
                view_id = str((call.response.get("view") or {}).get("id", ""))
                if user is not None and view_id:
                    stack = self.stacks.setdefault(user, [])
                    if call.method == "views.open":
                        stack.clear()
                    stack.append(view_id)
        # a pending (hung/delayed) call is re-read next time
        done = [c for c in slack.calls[self.seen_calls:] if c.status == 0]
        self.seen_calls = len(slack.calls) if not done else slack.calls.index(done[0])

    def top(self, user: str) -> str | None:
        stack = self.stacks.get(user) or []
        return stack[-1] if stack else None


class PageActions:
    def __init__(self, slack: SlackEmulator, client: SlackClient) -> None:
        self.slack = slack
        self.client = client
        self.modals = Modals()

    def _name(self, user: str) -> str:
        info = self.slack.users.get(user)
        if info is None:
            raise BadAction(f"unknown user {user!r}")
        return str(info["name"])

    def _trigger(self, user: str) -> str:
        trigger = f"{int(time.time())}.{self.slack.team_id}.{uuid.uuid4().hex[:20]}"
        self.modals.triggers[trigger] = user
        return trigger

    async def handle(self, act: dict[str, Any]) -> dict[str, Any]:
        """Do one page action; returns what the page should know (errors to show, a note)."""
        kind = act.get("kind")
        user = str(act.get("user", ""))
        name = self._name(user)
        if kind == "action":
            return await self._action(act, user, name)
        if kind == "submit":
            return await self._submit(act, user, name)
        if kind == "close":
            return await self._close(act, user)
        if kind == "message":
            return await self._message(act, user, name)
        if kind == "home":
            await self.client.event({"type": "app_home_opened", "user": user, "channel": "D" + user, "tab": "home",
                                     "event_ts": f"{time.time():.6f}"})
            return {}
        raise BadAction(f"unknown kind {kind!r}")

    async def _action(self, act: dict[str, Any], user: str, name: str) -> dict[str, Any]:
        raw = _raw(act)
        value = str(act["value"]) if act.get("value") is not None else None
        click = functools.partial(self.client.block_action, user=user, user_name=name,
                                  action_id=str(act.get("action_id", "")), block_id=str(act.get("block_id", "")),
                                  value=value, trigger_id=self._trigger(user))
        if act.get("view_id"):
            view = self.slack.views.get(str(act["view_id"]))
            if view is None:
                raise BadAction("that view is gone")
            answer = await click(view_id=view["id"], state_values=state_values(view["blocks"], raw))
        else:
            channel, ts = str(act.get("channel", "")), str(act.get("ts", ""))
            msg = self.slack.messages.get((channel, ts))
            if msg is None:
                raise BadAction("that message is gone")
            answer = await click(channel=channel, message_ts=ts, state_values=state_values(msg.blocks, raw))
        return {"status": answer.status}

    async def _submit(self, act: dict[str, Any], user: str, name: str) -> dict[str, Any]:
        view_id = str(act.get("view_id", ""))
        view = self.slack.views.get(view_id)
        if view is None or self.modals.top(user) != view_id:
            raise BadAction("that modal is not open")
        raw = _raw(act)
        answer = await self.client.view_submission(
            user=user, user_name=name, callback_id=view["callback_id"], values=state_values(view["blocks"], raw),
            private_metadata=view["private_metadata"], view_id=view_id, hash=view["hash"])
        return self._after_submit(user, view_id, answer)

    def _after_submit(self, user: str, view_id: str, answer: Response) -> dict[str, Any]:
        body = _json(answer)
        action = body.get("response_action") if isinstance(body, dict) else None
        stack = self.modals.stacks.setdefault(user, [])
        self.modals.errors.pop(view_id, None)
        if answer.status != 200:
            return {"error": f"the app answered HTTP {answer.status}"}
        if action == "errors":
            self.modals.errors[view_id] = {str(k): str(v) for k, v in (body.get("errors") or {}).items()}
        elif action in ("update", "push"):
            try:
                normalized = validate_view(body.get("view"))
            except ApiError as exc:
                return {"error": f"the app answered an invalid view: {exc.error}"}
            if action == "update":
                current = self.slack.views[view_id]
                self.slack.store_view(normalized, view_id=view_id, root_view_id=current["root_view_id"])
            else:
                stack.append(self.slack.store_view(normalized, root_view_id=view_id)["id"])
        elif action == "clear":
            stack.clear()
        elif view_id in stack:
            stack.remove(view_id)
        self.slack.changed()
        return {}

    async def _close(self, act: dict[str, Any], user: str) -> dict[str, Any]:
        view_id = str(act.get("view_id", ""))
        view = self.slack.views.get(view_id)
        stack = self.modals.stacks.setdefault(user, [])
        if view_id in stack:
            stack.remove(view_id)
        if view is not None and view.get("notify_on_close"):
            await self.client.view_closed(user=user, callback_id=view["callback_id"],
                                          private_metadata=view["private_metadata"], view_id=view_id)
        self.slack.changed()
        return {}

    async def _message(self, act: dict[str, Any], user: str, name: str) -> dict[str, Any]:
        text = str(act.get("text", "")).strip()
        channel = str(act.get("channel", ""))
        if not text or channel not in self.slack.channels and not channel.startswith("D"):
            raise BadAction("a message needs text and a channel")
        if text.startswith("/"):
            command, _, rest = text.partition(" ")
            # The manifest registers /signoff with should_escape: Slack sends a typed @bob as <@U..|bob>.
            answer = await self.client.command(user=user, user_name=name, command=command,
                                               text=self._as_slack_sends(rest.strip()),
                                               channel=channel, trigger_id=self._trigger(user))
            self._command_reply(user, channel, answer)
            return {"status": answer.status}
        thread_ts = str(act["thread_ts"]) if act.get("thread_ts") else None
        text = self._as_slack_sends(text)
        msg = self.slack.add_message(channel, user, text, thread_ts=thread_ts)
        self.slack.changed()
        event: dict[str, Any] = {"type": "message", "channel": channel, "user": user, "text": text, "ts": msg.ts,
                                 "event_ts": msg.ts, "channel_type": "im" if channel.startswith("D") else "channel"}
        if thread_ts:
            event["thread_ts"] = thread_ts
        answer = await self.client.event(event)
        return {"status": answer.status}

    def _as_slack_sends(self, text: str) -> str:
        """Typed text as Slack delivers it: `&`, `<`, `>` escaped; `@name` of a known user as <@U..|name>."""
        text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        by_name = {str(u["name"]).lower(): uid for uid, u in self.slack.users.items()}

        def mention(m: re.Match[str]) -> str:
            uid = by_name.get(m.group(1).lower())
            return f"<@{uid}|{m.group(1)}>" if uid else m.group(0)

        return re.sub(r"(?<![\w<])@([\w.\-]+)", mention, text)

    def _command_reply(self, user: str, channel: str, answer: Response) -> None:
        """A command's ack body is shown to whoever typed it, as Slack shows it (only to them)."""
        body = _json(answer)
        if isinstance(body, dict):
            text, blocks = str(body.get("text", "")), body.get("blocks") or []
        else:
            text, blocks = answer.text.strip(), []
        if answer.status != 200:
            text, blocks = f"/command failed: HTTP {answer.status}", []
        if text or blocks:
            self.slack.add_ephemeral(channel, user, text, blocks)


def _raw(act: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The form's raw values, ``{block_id: {action_id: value}}``; anything else counts as empty."""
    raw = act.get("raw")
    if not isinstance(raw, dict):
        return {}
    return {str(k): v for k, v in raw.items() if isinstance(v, dict)}


def _json(answer: Response) -> Any:
    try:
        return json.loads(answer.text) if answer.text.strip() else None
    except ValueError:
        return None
