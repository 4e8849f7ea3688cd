"""Block Kit, view and metadata validation as Slack does it: slack_sdk's models plus the limits they skip.

``slack_sdk.models`` checks most limits when a block is serialised (``Block.parse(b).to_dict()``), but
not the 50 blocks of a message nor the 2000 characters of a section field (SLACK_FACTS.md section 2);
those are counted here. Every problem becomes ``invalid_blocks`` (or ``invalid_arguments`` for views)
with one ``[ERROR] reason [json-pointer:...]`` line per problem, the way Slack reports them.
"""

from __future__ import annotations

import warnings
from typing import Any

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from bot.sandbox.errors import ApiError

MAX_MESSAGE_BLOCKS = 50
MAX_VIEW_BLOCKS = 100
MAX_TEXT = 40_000
MAX_FIELD_TEXT = 2000


def validate_blocks(blocks: Any, *, limit: int, each_block: bool = True) -> list[dict[str, Any]]:
    """Validate like Slack would, using slack_sdk's models; returns the blocks unchanged.
    `each_block=False`: only the array and its length (the benchmarks' sampling, Workspace.block_check_every)."""
    if not isinstance(blocks, list):
        raise ApiError("invalid_blocks_format", ["[ERROR] blocks must be a JSON array"])
    if len(blocks) > limit:
        raise ApiError("invalid_blocks", [f"[ERROR] no more than {limit} items allowed [json-pointer:/blocks]"])
    problems = []
    for index, raw in enumerate(blocks if each_block else ()):
        problem = block_problem(raw)
        if problem is not None:
            problems.append(f"[ERROR] {problem[0]} [json-pointer:/blocks/{index}{problem[1]}]")
    if problems:
        raise ApiError("invalid_blocks", problems)
    return blocks


def block_problem(raw: Any) -> tuple[str, str] | None:
    """Why Slack would refuse this block, and where inside it (a JSON pointer suffix); None if fine."""
    if not isinstance(raw, dict):
        return "block must be an object", ""
    try:
        # Block models may warn (e.g. deprecated fields); a fake must not turn that into
        # an exception under pytest's filterwarnings=error. No await inside, so this is safe.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parsed = Block.parse(raw)
            if parsed is None:
                return f"unknown block type {raw.get('type')!r}", ""
            parsed.to_dict()
    except Exception as exc:  # noqa: BLE001 - any failure is a validation failure
        return f"{type(exc).__name__}: {exc}", ""
    return _count_problem(raw)


def _count_problem(raw: dict[str, Any]) -> tuple[str, str] | None:
    """The documented limits slack_sdk does not check (SLACK_FACTS.md section 2)."""
    for index, item in enumerate(raw.get("fields") or []):
        text = item.get("text") if isinstance(item, dict) else None
        if isinstance(text, str) and len(text) > MAX_FIELD_TEXT:
            return f"must be less than {MAX_FIELD_TEXT + 1} characters", f"/fields/{index}/text"
    return None


def validate_view(view: Any) -> dict[str, Any]:
    """Validate a view with slack_sdk's View model plus the checks Slack adds on top."""
    if not isinstance(view, dict):
        raise ApiError("invalid_arguments", ["[ERROR] view must be a JSON object [json-pointer:/view]"])
    problems: list[str] = []
    blocks = view.get("blocks")
    if not isinstance(blocks, list) or not blocks:
        problems.append("[ERROR] view must contain between 1 and 100 blocks [json-pointer:/view/blocks]")
    else:
        for index, raw in enumerate(blocks):
            problem = block_problem(raw)
            if problem is not None:
                problems.append(f"[ERROR] {problem[0]} [json-pointer:/view/blocks/{index}{problem[1]}]")
    if view.get("type") == "modal":
        if not view.get("title"):
            problems.append("[ERROR] modal views require a title [json-pointer:/view/title]")
        if isinstance(blocks, list) and any(isinstance(b, dict) and b.get("type") == "input" for b in blocks):
            if not view.get("submit"):
                problems.append("[ERROR] submit is required when a view has input blocks [json-pointer:/view/submit]")
    normalized: dict[str, Any] = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            normalized = View(**view).to_dict()
    except Exception as exc:  # noqa: BLE001
        problems.append(f"[ERROR] {type(exc).__name__}: {exc} [json-pointer:/view]")
    if problems:
        raise ApiError("invalid_arguments", problems)
    return normalized


def validate_metadata(metadata: Any) -> dict[str, Any] | None:
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise ApiError("invalid_metadata_format")
    if not isinstance(metadata.get("event_type"), str) or not isinstance(metadata.get("event_payload", {}), dict):
        raise ApiError("invalid_metadata_schema")
    return {"event_type": metadata["event_type"], "event_payload": metadata.get("event_payload", {})}

