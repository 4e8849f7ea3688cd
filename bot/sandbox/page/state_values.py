"""What Slack puts in ``state.values`` for a form, rebuilt from the blocks the bot sent.

The page only sends raw choices (a text, a date, the values of ticked options); Slack's payload
carries whole option objects, so they are taken from the element definitions, exactly as sent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

_SKIP = frozenset({"button", "overflow", "image"})


def elements_of(block: dict[str, Any]) -> list[dict[str, Any]]:
    """The interactive elements of one block."""
    if block.get("type") == "input" and isinstance(block.get("element"), dict):
        return [block["element"]]
    if block.get("type") == "actions":
        return [e for e in block.get("elements") or [] if isinstance(e, dict)]
    accessory = block.get("accessory")
    return [accessory] if isinstance(accessory, dict) else []


def state_values(blocks: list[dict[str, Any]], raw: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{block_id: {action_id: state}}`` for every stateful element in ``blocks``."""
    values: dict[str, dict[str, Any]] = {}
    for block in blocks:
        block_id = str(block.get("block_id", ""))
        for element in elements_of(block):
            kind = str(element.get("type", ""))
            if kind in _SKIP or not element.get("action_id"):
                continue
            action_id = str(element["action_id"])
            got = (raw.get(block_id) or {}).get(action_id)
            values.setdefault(block_id, {})[action_id] = element_state(element, got)
    return values


def _all_options(element: dict[str, Any]) -> list[dict[str, Any]]:
    found = list(element.get("options") or [])
    for group in element.get("option_groups") or []:
        found.extend(group.get("options") or [])
    return found


def element_state(element: dict[str, Any], got: Any) -> dict[str, Any]:
    kind = str(element.get("type", ""))
    text = str(got) if isinstance(got, (str, int, float)) and str(got) != "" else None
    picked = [str(v) for v in got] if isinstance(got, list) else ([text] if text is not None else [])
    options = [o for o in _all_options(element) if str(o.get("value")) in picked]
    if kind in ("plain_text_input", "number_input", "email_text_input", "url_text_input"):
        return {"type": kind, "value": text}
    if kind in ("static_select", "radio_buttons"):
        return {"type": kind, "selected_option": options[0] if options else None}
    if kind in ("multi_static_select", "checkboxes"):
        return {"type": kind, "selected_options": options}
    if kind == "users_select":
        return {"type": kind, "selected_user": text}
    if kind == "multi_users_select":
        return {"type": kind, "selected_users": picked}
    if kind == "datepicker":
        return {"type": kind, "selected_date": text}
    if kind == "timepicker":
        return {"type": kind, "selected_time": text}
    if kind == "datetimepicker":
        stamp = int(datetime.fromisoformat(text).timestamp()) if text else None
        return {"type": kind, "selected_date_time": stamp}
    if kind == "rich_text_input":
        section = {"type": "rich_text_section", "elements": [{"type": "text", "text": text or ""}]}
        return {"type": kind, "rich_text_value": {"type": "rich_text", "elements": [section]}}
    return {"type": kind, "value": text}
