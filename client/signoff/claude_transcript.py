"""What `signoff hook claude-code` reads in Claude Code's transcript (`transcript_path`, JSONL).

One JSON entry a line. An assistant message may be split over several `assistant` entries that share
`message.id` (one content block each); a call's result comes back in a `user` entry as a
`tool_result` block naming its `tool_use_id`.

Invariants:
- Read through `signoff._files`: a regular file only (a FIFO, a device or a directory is refused
  without waiting), its last TAIL_BYTES at most, within READ_SECONDS. The call being asked about is
  in the newest entries, so the tail is what is needed; a line cut at the window's start is dropped.
- Whatever cannot be read or told for sure is None, and None never lets a call through: the hook
  then asks anew (no approval is reused) and denies instead of deferring (a deferred call could be
  lost). So a window that may have cut the message in question answers None, not a guess.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from signoff._files import read_tail

TAIL_BYTES = 4 * 1024 * 1024
SETTLE_SECONDS = 1.0  # how long a call may take to reach the transcript after its hook was called
SETTLE_PAUSE = 0.05


@dataclass(frozen=True)
class Transcript:
    entries: list[dict[str, Any]]
    complete: bool  # the window starts at the file's first byte


def read(path: str | None) -> Transcript | None:
    """The transcript's last entries, or None when it cannot be read."""
    if not path:
        return None
    tail = read_tail(path, TAIL_BYTES)
    if tail is None:
        return None
    lines = tail.data.split(b"\n")
    if tail.start > 0:
        lines = lines[1:]  # may be the end of a longer line
    entries = []
    for line in lines:
        try:
            entry = json.loads(line) if line.strip() else None
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return Transcript(entries, tail.start == 0)


def _uses(entry: dict[str, Any]) -> tuple[str, list[dict[str, Any]]] | None:
    """(message key, tool_use blocks) of an assistant entry, else None."""
    message = entry.get("message") if entry.get("type") == "assistant" else None
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return None
    blocks = [b for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
    return str(message.get("id") or id(entry)), blocks


def _results(entry: dict[str, Any]) -> set[str]:
    message = entry.get("message") if entry.get("type") == "user" else None
    content = message.get("content") if isinstance(message, dict) else None
    return {str(b.get("tool_use_id")) for b in content if isinstance(b, dict) and b.get("type") == "tool_result"} \
        if isinstance(content, list) else set()


def tool_calls_in_turn(transcript: Transcript | None, tool_use_id: str | None) -> int | None:
    """How many tool calls the assistant message holding `tool_use_id` has (None: cannot tell)."""
    if transcript is None or not tool_use_id:
        return None
    blocks_by_message: dict[str, list[dict[str, Any]]] = {}  # in the order each message first appears
    owner = None
    for entry in transcript.entries:
        found = _uses(entry)
        if found is None:
            continue
        key, uses = found
        blocks_by_message.setdefault(key, []).extend(uses)
        if owner is None and any(b.get("id") == tool_use_id for b in uses):
            owner = key
    if owner is None:
        return None
    if not transcript.complete and next(iter(blocks_by_message)) == owner:
        return None  # the window may have cut the owner's first entries: no earlier message shows it did not
    return len({b.get("id") for b in blocks_by_message[owner]})


def pending_call_id(transcript: Transcript | None, tool_name: str, tool_input: dict[str, Any]) -> str | None:
    """The id of THE call being asked about: the one `tool_use` of `tool_name` with exactly `tool_input`
    that has no result yet, in the newest assistant message. None when there is not exactly one.

    A PermissionRequest carries no `tool_use_id`. An earlier identical call that already ran (it has
    a result), two identical calls still open, or a call not in the newest message are not this one:
    answering from their request would reuse an approval given for another call.
    """
    if transcript is None:
        return None
    open_calls: dict[str, str] = {}  # id -> message key
    resulted: set[str] = set()
    newest = None
    for entry in transcript.entries:
        resulted |= _results(entry)
        found = _uses(entry)
        if found is None:
            continue
        newest, uses = found
        for block in uses:
            if block.get("name") == tool_name and block.get("input") == tool_input and isinstance(block.get("id"), str):
                open_calls[block["id"]] = newest
    candidates = [call for call in open_calls if call not in resulted]
    if len(candidates) != 1 or open_calls[candidates[0]] != newest:
        return None
    return candidates[0]


def _holds(transcript: Transcript, tool_use_id: str) -> bool:
    return any(b.get("id") == tool_use_id for entry in transcript.entries if (found := _uses(entry)) for b in found[1])


def calls_in_turn(path: str | None, tool_use_id: str | None, settle: float = SETTLE_SECONDS) -> int | None:
    """`tool_calls_in_turn` of the transcript at `path`. Claude Code may call a hook before the turn's
    assistant entry is written (an HTTP hook, or a command hook that starts fast), so a transcript
    that does not hold the call yet is read again, for up to `settle` seconds."""
    deadline = time.monotonic() + settle
    while True:
        transcript = read(path)
        if transcript is None or not tool_use_id:
            return None
        if _holds(transcript, tool_use_id) or time.monotonic() >= deadline:
            return tool_calls_in_turn(transcript, tool_use_id)
        time.sleep(SETTLE_PAUSE)


def call_id_of(path: str | None, tool_name: str, tool_input: dict[str, Any],
               settle: float = SETTLE_SECONDS) -> str | None:
    """`pending_call_id` in the transcript at `path`, read again for up to `settle` seconds while it
    finds none (the hook may be called before the call reaches the transcript)."""
    deadline = time.monotonic() + settle
    while True:
        transcript = read(path)
        found = pending_call_id(transcript, tool_name, tool_input)
        if found is not None or transcript is None or time.monotonic() >= deadline:
            return found
        time.sleep(SETTLE_PAUSE)
