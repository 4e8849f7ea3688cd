"""Pure parsing of Slack interaction payloads into small typed values."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

REQUEST_ID = re.compile(r"^[a-z]{3}_[0-9a-z]{26}$")


class BadPayload(ValueError):
    """The payload is not one of ours (malformed, or a forged/unknown value)."""


@dataclass(frozen=True)
class Click:
    user_id: str
    user_name: str | None
    action_id: str
    request_id: str
    trigger_id: str | None
    channel_id: str | None
    message_ts: str | None
    view_id: str | None


@dataclass(frozen=True)
class Submission:
    user_id: str
    user_name: str | None
    callback_id: str
    request_id: str
    version: int | None
    channel_id: str | None
    message_ts: str | None
    values: dict[str, Any]


def user_of(body: dict[str, Any]) -> tuple[str, str | None]:
    user = body.get("user") or {}
    user_id = user.get("id")
    if not isinstance(user_id, str) or not user_id:
        raise BadPayload("payload has no user id")
    name = user.get("name") or user.get("username")
    return user_id, name if isinstance(name, str) else None


def extract_click(body: dict[str, Any]) -> Click:
    user_id, user_name = user_of(body)
    actions = body.get("actions") or []
    if not actions or not isinstance(actions[0], dict):
        raise BadPayload("payload has no action")
    action = actions[0]
    request_id = action.get("value")
    if not isinstance(request_id, str) or not REQUEST_ID.match(request_id):
        raise BadPayload("this button does not carry a Signoff request id")
    container = body.get("container") or {}
    channel = (body.get("channel") or {}).get("id") or container.get("channel_id")
    return Click(
        user_id=user_id,
        user_name=user_name,
        action_id=str(action.get("action_id")),
        request_id=request_id,
        trigger_id=body.get("trigger_id"),
        channel_id=channel,
        message_ts=container.get("message_ts") or (body.get("message") or {}).get("ts"),
        view_id=container.get("view_id"),
    )


def extract_submission(body: dict[str, Any]) -> Submission:
    user_id, user_name = user_of(body)
    view = body.get("view") or {}
    try:
        meta = json.loads(view.get("private_metadata") or "{}")
    except json.JSONDecodeError:
        raise BadPayload("the form's metadata is not ours") from None
    request_id = meta.get("request_id") if isinstance(meta, dict) else None
    if not isinstance(request_id, str) or not REQUEST_ID.match(request_id):
        raise BadPayload("the form does not carry a Signoff request id")
    version = meta.get("version")
    return Submission(
        user_id=user_id,
        user_name=user_name,
        callback_id=str(view.get("callback_id")),
        request_id=request_id,
        version=version if isinstance(version, int) else None,
        channel_id=meta.get("channel"),
        message_ts=meta.get("message_ts"),
        values=((view.get("state") or {}).get("values")) or {},
    )
