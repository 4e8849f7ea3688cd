"""conversations.*, users.*, usergroups.* and auth.test: the workspace's directory and history."""

from __future__ import annotations

import json
from typing import Any

from bot.sandbox.errors import ApiError
from bot.sandbox.state import Message, Workspace, decode_cursor, encode_cursor, ts_key


class ConversationMethods(Workspace):
    def _auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://fake-slack.test/",
            "team": "Fake Team",
            "user": self.users[self.bot_user_id]["name"],
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _page(
        self, messages: list[Message], args: dict[str, Any], *, default_limit: int, include_metadata: bool
    ) -> dict[str, Any]:
        limit = args.get("limit") or default_limit
        if not isinstance(limit, int) or limit < 1:
            raise ApiError("invalid_limit")
        start = 0
        if args.get("cursor"):
            cursor_ts = decode_cursor(str(args["cursor"]))
            starts = [i for i, m in enumerate(messages) if m.ts == cursor_ts]
            if not starts:
                raise ApiError("invalid_cursor")
            start = starts[0]
        page = messages[start : start + limit]
        more = start + limit < len(messages)
        out: dict[str, Any] = {
            "messages": [self._message_json(m, include_metadata=include_metadata) for m in page],
            "has_more": more,
        }
        if more:
            out["response_metadata"] = {"next_cursor": encode_cursor(messages[start + limit].ts)}
        return out

    def _in_window(self, msg: Message, args: dict[str, Any]) -> bool:
        inclusive = bool(args.get("inclusive"))
        key = ts_key(msg.ts)
        if args.get("oldest"):
            oldest = ts_key(str(args["oldest"]))
            if key < oldest or (key == oldest and not inclusive):
                return False
        if args.get("latest"):
            latest = ts_key(str(args["latest"]))
            if key > latest or (key == latest and not inclusive):
                return False
        return True

    def _conversations_join(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        info = self.channels.get(channel)
        if info is None:
            raise ApiError("channel_not_found")
        if info.get("private"):
            raise ApiError("method_not_supported_for_channel_type")
        already = info.get("bot_member", True)
        info["bot_member"] = True
        answer: dict[str, Any] = {"channel": {"id": channel, "name": info["name"], "is_member": True}}
        if already:
            answer["warning"] = "already_in_channel"
        return answer

    def _conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        self._require_member(channel)
        found = [m for m in self.channel_messages(channel) if self._in_window(m, args)]
        found.reverse()  # newest first, like Slack
        return self._page(found, args, default_limit=100, include_metadata=bool(args.get("include_all_metadata")))

    def _conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        self._require_member(channel)
        ts = self._require(args, "ts", "thread_not_found")
        msg = self.messages.get((channel, ts))
        if msg is None:
            raise ApiError("thread_not_found")
        parent_ts = msg.thread_ts or msg.ts
        parent = self.messages.get((channel, parent_ts))
        thread = ([parent] if parent is not None else []) + self.channel_messages(channel, thread_ts=parent_ts)
        found = [m for m in thread if self._in_window(m, args)]
        return self._page(found, args, default_limit=1000, include_metadata=bool(args.get("include_all_metadata")))

    def _conversations_info(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        info = self.channels.get(channel)
        name = info["name"] if info else channel.lower()
        is_im = channel.startswith("D")
        out: dict[str, Any] = {
            "id": channel,
            "name": name,
            "is_channel": channel.startswith("C"),
            "is_group": channel.startswith("G"),
            "is_im": is_im,
            "is_private": bool(info.get("private")) if info else not channel.startswith("C"),
            "is_member": bool(info.get("bot_member", True)) if info else True,
            "is_archived": False,
        }
        if is_im:
            out["user"] = channel[1:]
        return {"channel": out}

    def _conversations_open(self, args: dict[str, Any]) -> dict[str, Any]:
        if args.get("channel"):
            return {"channel": {"id": self._resolve_channel(args["channel"])}}
        users = [u for u in str(args.get("users") or "").split(",") if u]
        if not users:
            raise ApiError("users_list_not_supplied")
        if len(users) == 1:
            return {"channel": {"id": "D" + users[0]}}
        return {"channel": {"id": "G" + "".join(sorted(users))}}

    def _conversations_members(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        info = self.channels.get(channel)
        if info is None:
            raise ApiError("channel_not_found")
        members = list(info["members"])
        limit = args.get("limit") or 100
        start = int(args["cursor"]) if str(args.get("cursor") or "").isdigit() else 0
        page = members[start : start + limit]
        more = start + limit < len(members)
        return {
            "members": page,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def _users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(str(args.get("user") or ""))
        if user is None:
            raise ApiError("user_not_found")
        return {"user": json.loads(json.dumps(user))}

    def _usergroups_list(self, args: dict[str, Any]) -> dict[str, Any]:
        groups = []
        for group in self.usergroups.values():
            item = {k: v for k, v in group.items() if k != "users"}
            item["user_count"] = len(group["users"])
            if args.get("include_users"):
                item["users"] = list(group["users"])
            groups.append(item)
        return {"usergroups": groups}

    def _usergroups_users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        group = self.usergroups.get(str(args.get("usergroup") or ""))
        if group is None:
            raise ApiError("no_such_subteam")
        return {"users": list(group["users"])}

