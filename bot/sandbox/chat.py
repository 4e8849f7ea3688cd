"""chat.* methods: post, update, delete, ephemeral messages and permalinks."""

from __future__ import annotations

from typing import Any

from bot.sandbox.errors import ApiError
from bot.sandbox.limits import MAX_MESSAGE_BLOCKS, MAX_TEXT, validate_blocks, validate_metadata
from bot.sandbox.state import PERMALINK_HOST, Message, MessageVersion, Workspace


class ChatMethods(Workspace):
    def _message_content(self, args: dict[str, Any], *, required: bool) -> dict[str, Any]:
        """Validate text/blocks/attachments/metadata; returns only the keys present."""
        content: dict[str, Any] = {}
        if "blocks" in args:
            self._block_checks += 1
            every = self.block_check_every
            whole = every == 1 or every > 1 and (self._block_checks <= every or self._block_checks % every == 0)
            content["blocks"] = validate_blocks(args["blocks"], limit=MAX_MESSAGE_BLOCKS, each_block=whole)
        if "attachments" in args:
            if not isinstance(args["attachments"], list):
                raise ApiError("invalid_attachments")
            content["attachments"] = args["attachments"]
        if "text" in args:
            text = args["text"]
            if not isinstance(text, str):
                raise ApiError("invalid_arguments", ["[ERROR] text must be a string"])
            if len(text) > MAX_TEXT:
                raise ApiError("msg_too_long")
            content["text"] = text
        if "metadata" in args:
            content["metadata"] = validate_metadata(args["metadata"])
        if required and not (content.get("text") or content.get("blocks") or content.get("attachments")):
            raise ApiError("no_text")
        return content

    def _chat_post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        info = self.channels.get(channel) or {}
        if info.get("private") or (self.scopes is not None and "chat:write.public" not in self.scopes):
            self._require_member(channel)  # chat:write.public covers public channels only
        content = self._message_content(args, required=True)
        thread_ts = args.get("thread_ts") or None
        if thread_ts is not None:
            parent = self.messages.get((channel, thread_ts))
            if parent is not None and parent.thread_ts is not None:
                thread_ts = parent.thread_ts  # replying to a reply lands in the same thread
        msg = Message(
            channel=channel,
            ts=self._next_ts(),
            text=content.get("text", ""),
            blocks=content.get("blocks", []),
            metadata=content.get("metadata"),
            thread_ts=thread_ts,
            user=self.bot_user_id,
            attachments=content.get("attachments"),
            bot_id=self.bot_id,
        )
        self.messages[(channel, msg.ts)] = msg
        return {"channel": channel, "ts": msg.ts, "message": self._message_json(msg, include_metadata=True)}

    def _chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        ts = self._require(args, "ts", "message_not_found")
        msg = self.messages.get((channel, ts))
        if msg is None:
            raise ApiError("message_not_found")
        if msg.user != self.bot_user_id:
            raise ApiError("cant_update_message")
        content = self._message_content(args, required=False)
        if not content:
            raise ApiError("no_text")
        msg.history.append(MessageVersion(msg.text, msg.blocks, msg.metadata, msg.attachments))
        msg.text = content.get("text", msg.text)
        msg.blocks = content.get("blocks", msg.blocks)
        msg.attachments = content.get("attachments", msg.attachments)
        if "metadata" in content:
            msg.metadata = content["metadata"]
        msg.update_count += 1
        return {
            "channel": channel,
            "ts": ts,
            "text": msg.text,
            "message": self._message_json(msg, include_metadata=True),
        }

    def _chat_delete(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        ts = self._require(args, "ts", "message_not_found")
        msg = self.messages.get((channel, ts))
        if msg is None:
            raise ApiError("message_not_found")
        if msg.user != self.bot_user_id:
            raise ApiError("cant_delete_message")
        del self.messages[(channel, ts)]
        return {"channel": channel, "ts": ts}

    def _chat_post_ephemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        user = self._require(args, "user", "user_not_in_channel")
        content = self._message_content(args, required=True)
        ts = self._next_ts()
        self.ephemerals.append(
            {
                "channel": channel,
                "user": user,
                "text": content.get("text", ""),
                "blocks": content.get("blocks", []),
                "thread_ts": args.get("thread_ts"),
                "ts": ts,
            }
        )
        return {"message_ts": ts}

    def _chat_get_permalink(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(args.get("channel"))
        ts = self._require(args, "message_ts", "message_not_found")
        msg = self.messages.get((channel, ts))
        if msg is None:
            raise ApiError("message_not_found")
        link = f"{PERMALINK_HOST}/archives/{channel}/p{ts.replace('.', '')}"
        if msg.thread_ts is not None:
            link += f"?thread_ts={msg.thread_ts}&cid={channel}"
        return {"channel": channel, "permalink": link}

