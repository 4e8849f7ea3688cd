"""The shape every Slack payload must have before a listener reads it (a signed body is still input).

Listeners read payloads with `.get()` chains that assume dicts and strings where Slack puts them.
A validly signed body with a string where an object belongs (`"user": "U1"`), a list for
`view.state.values`, or a number for `private_metadata` would crash them with a 500. `problem`
checks those places once, at the door: such a payload is acked and dropped, nothing is written.
Unknown fields are fine (Slack adds fields); only the types of the fields we read are checked.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class _User(_Open):
    id: str
    name: str | None = None
    username: str | None = None


class _Channel(_Open):
    id: str | None = None


class _Container(_Open):
    channel_id: str | None = None
    message_ts: str | None = None
    view_id: str | None = None


class _Message(_Open):
    ts: str | None = None
    thread_ts: str | None = None


class _Action(_Open):
    action_id: str  # Bolt's matchers read it unguarded
    value: str | None = None
    block_id: str | None = None


class _State(_Open):
    values: dict[str, dict[str, dict[str, Any]]] = {}


class _View(_Open):
    id: str | None = None
    callback_id: str = ""  # Bolt's matchers read it unguarded
    private_metadata: str | None = None
    hash: str | None = None
    state: _State | None = None


class _Interaction(_Open):
    type: str
    user: _User | None = None
    channel: _Channel | None = None
    container: _Container | None = None
    message: _Message | None = None
    actions: list[_Action] | None = None
    view: _View | None = None
    state: _State | None = None
    trigger_id: str | None = None


class _Event(_Open):
    type: str
    user: str | None = None
    text: str | None = None
    ts: str | None = None
    thread_ts: str | None = None
    channel: str | None = None
    subtype: str | None = None
    bot_id: str | None = None


class _Envelope(_Open):
    type: str
    event: _Event
    event_id: str | None = None


READ_EVENTS = frozenset({"message", "app_home_opened", "app_mention"})  # the events whose fields we read


def problem(body: dict[str, Any]) -> str | None:
    """None if the listeners can read `body` safely, else a short reason (for the log)."""
    kind = body.get("type")
    try:
        if kind == "event_callback":
            event = body.get("event")
            if not isinstance(event, dict) or event.get("type") in READ_EVENTS:
                _Envelope.model_validate(body)
        elif kind in ("block_actions", "view_submission", "view_closed", "block_suggestion", "shortcut",
                      "message_action"):
            parsed = _Interaction.model_validate(body)
            if kind in ("view_submission", "view_closed") and parsed.view is None:
                return f"{kind}: view: missing"
            if kind == "block_actions" and not parsed.actions:
                return f"{kind}: actions: missing"
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        return f"{kind}: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return None
