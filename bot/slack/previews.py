"""Text primitives for agent-written content, and preview rendering (email, diff, table, ...).

Everything an agent writes is untrusted. Three rules keep it from speaking for Signoff:

* It goes into `plain_text` objects and `rich_text` text elements, which Slack does not parse
  as mrkdwn. `neutralise` still breaks every `<!...>`, `<@...>`, `<#...>` and `<scheme:...>`
  sequence with a zero-width space, so the token never exists, even in the raw JSON.
* Where mrkdwn is unavoidable it is passed through `escape_mrkdwn` first.
* Invisible characters (bidi overrides, zero-width spaces, other format controls) are shown as
  markers such as `⟨U+202E⟩` (`bot.slack.text.visible`), before budgets are counted.
* Markdown previews go through `safe_markdown`: HTML-escaped and with every link rewritten as
  `label (url)` so the real destination is always on screen.

Builders return plain dicts and never exceed the budget they are given (characters of text).
The text primitives (escaping, clipping, mentions, dates) are in `bot/slack/text.py`.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from typing import Any

from bot.domain.model import Preview
from bot.slack.text import ELLIPSIS, ZWSP, clip, count, cut, escape_mrkdwn, more, neutralise, one_line, visible

__all__ = ["ELLIPSIS", "ZWSP", "clip", "count", "cut", "escape_mrkdwn", "more", "neutralise", "one_line"]

TEXT_ELEMENT_MAX = 3000  # our cap for one rich_text text element (Slack documents none)
MARKDOWN_BLOCK_MAX = 12_000  # Slack's limit for a `markdown` block
LINE_MAX = 300  # one line of code or table; longer lines are clipped with "…"
TABLE_CELL_MAX = 40
TABLE_COLUMNS_MAX = 8
PREVIEW_MIN_BUDGET = 400  # below this a preview is not worth showing; we still show the marker

# --------------------------------------------------------------------------- text primitives


def plain(text: str, *, limit: int | None = None) -> dict[str, Any]:
    """A plain_text object for agent text: neutralised, never empty, optionally clipped.

    `emoji` is off so an agent cannot turn `:white_check_mark:` into our own outcome icons.
    """
    value = neutralise(text) or "-"
    if limit is not None:
        value = clip(value, limit)
    return {"type": "plain_text", "text": value, "emoji": False}


def rt_text(text: str, *, bold: bool = False, italic: bool = False, code: bool = False) -> dict[str, Any]:
    """A rich_text `text` element (never mrkdwn-parsed)."""
    element: dict[str, Any] = {"type": "text", "text": neutralise(text) or " "}
    style = {k: True for k, on in (("bold", bold), ("italic", italic), ("code", code)) if on}
    if style:
        element["style"] = style
    return element


def rt_section(*elements: dict[str, Any]) -> dict[str, Any]:
    return {"type": "rich_text_section", "elements": list(elements)}


def rt_pre(text: str) -> dict[str, Any]:
    return {"type": "rich_text_preformatted", "elements": [rt_text(part) for part in chunks(text)]}


def rt_quote(text: str) -> dict[str, Any]:
    return {"type": "rich_text_quote", "elements": [rt_text(part) for part in chunks(text)]}


def chunks(text: str, size: int = TEXT_ELEMENT_MAX) -> list[str]:
    """`text` in pieces of at most `size` characters, split after a newline where possible.

    Slack documents no limit for one rich_text text element; pieces keep each under the
    3000 it enforces everywhere else, and consecutive elements render as one block of text.
    """
    parts: list[str] = []
    while len(text) > size:
        cut_at = text.rfind("\n", 0, size) + 1 or size
        parts.append(text[:cut_at])
        text = text[cut_at:]
    return [*parts, text] if text or not parts else parts


def rt_bullets(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "rich_text_list", "style": "bullet", "elements": list(items)}


def rich_text(*elements: dict[str, Any]) -> dict[str, Any]:
    return {"type": "rich_text", "elements": list(elements)}


def note(text: str) -> dict[str, Any]:
    """A grey italic line inside a rich_text block, for truncation markers and captions."""
    return rt_section(rt_text(text, italic=True))


def show_value(value: Any) -> str:
    """A parameter value as a person reads it: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def take_lines(lines: Sequence[str], budget: int) -> tuple[str, int]:
    """Join whole lines (each clipped to LINE_MAX) until `budget` characters; return (text, left out)."""
    kept: list[str] = []
    used = 0
    for line in lines:
        line = clip(line, LINE_MAX)
        if used + len(line) + 1 > budget and kept:
            break
        if used + len(line) + 1 > budget:  # the first line alone is too long: clip it
            line = clip(line, max(1, budget - 1))
        kept.append(line)
        used += len(line) + 1
    return "\n".join(kept), len(lines) - len(kept)


def text_length(node: Any) -> int:
    """Characters of every `text` string in a block tree (our estimate of Slack's size check).

    A loop over a stack, not recursion through generators: every card is measured several times
    as it is built, and the recursive form was 3 % of the server's CPU in a burst of card updates."""
    total = 0
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if isinstance(value, str):
                    if key == "text":
                        total += len(value)
                elif isinstance(value, dict | list):
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return total


# --------------------------------------------------------------------------- previews


def render_preview(preview: Preview, budget: int) -> list[dict[str, Any]]:
    """Blocks for `preview` using at most `budget` characters of text."""
    budget = max(budget, PREVIEW_MIN_BUDGET)
    render = _RENDERERS.get(preview.kind, _render_json_of_data)
    # Invisible characters marked before anything is measured or cut: the budget counts what shows.
    data = _shown(preview.data if isinstance(preview.data, dict) else {"value": preview.data})
    return render(data, budget)


def _shown(value: Any) -> Any:
    """`value` with `visible` applied to every string in it (keys too)."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {visible(k) if isinstance(k, str) else k: _shown(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_shown(v) for v in value]
    return value


def _code_block(caption: list[dict[str, Any]], lines: Sequence[str], budget: int) -> list[dict[str, Any]]:
    """One rich_text block: optional caption, the lines that fit, and "… N more lines"."""
    room = budget - text_length(caption) - len(more(len(lines), "lines"))
    body, left = take_lines(lines, max(room, 1))
    elements = [*caption, rt_pre(body or " ")]
    if left:
        elements.append(note(more(left, "lines")))
    return [rich_text(*elements)]


def _addresses(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


def _render_email(data: dict[str, Any], budget: int) -> list[dict[str, Any]]:
    heads: list[dict[str, Any]] = []
    for label, key in (("To", "to"), ("Cc", "cc"), ("Bcc", "bcc"), ("Subject", "subject")):
        value = one_line(_addresses(data.get(key)))
        if not value and key not in ("to", "subject"):
            continue
        if heads:
            heads.append(rt_text("\n"))
        heads += [rt_text(f"{label}: ", bold=True), rt_text(clip(value, 500) or "(none)")]
    elements = [rt_section(rt_text("✉️ Email", bold=True)), rt_section(*heads)]
    lines = str(data.get("body") or "").splitlines()
    room = budget - text_length(elements) - len(more(len(lines), "lines"))
    shown, left = take_lines(lines, max(room, 1))
    elements.append(rt_quote(shown or "(empty body)"))
    if left:
        elements.append(note(more(left, "lines")))
    return [rich_text(*elements)]


def diff_lines(data: dict[str, Any]) -> list[str]:
    """The unified diff as lines: given as `unified`, or computed from `before`/`after`."""
    if isinstance(data.get("unified"), str):
        return str(data["unified"]).splitlines()
    path = str(data.get("path") or "file")
    before = str(data.get("before") or "").splitlines()
    after = str(data.get("after") or "").splitlines()
    old, new = (path, path) if path.startswith("/") else (f"a/{path}", f"b/{path}")  # not a//tmp/x
    return list(difflib.unified_diff(before, after, old, new, lineterm=""))


def _render_diff(data: dict[str, Any], budget: int) -> list[dict[str, Any]]:
    lines = diff_lines(data)
    added = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
    removed = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
    title = clip(one_line(str(data.get("path") or "Diff")), 200)
    caption = [rt_section(rt_text("📄 "), rt_text(title, bold=True), rt_text(f"  +{added} −{removed}"))]
    if not lines:
        return [rich_text(*caption, note("no changes"))]
    return _code_block(caption, lines, budget)


def _cell(value: Any) -> str:
    text = "" if value is None else show_value(value)
    return clip(one_line(text), TABLE_CELL_MAX)


def table_rows(data: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(column names, rows of cell strings); rows may be lists or dicts keyed by column."""
    given = data.get("rows")
    rows: list[Any] = given if isinstance(given, list) else []
    columns = [str(c) for c in data.get("columns") or []]
    if not columns and rows and isinstance(rows[0], dict):
        columns = [str(k) for k in rows[0]]
    cells = []
    for row in rows:
        if isinstance(row, dict):
            cells.append([_cell(row.get(c)) for c in columns])
        elif isinstance(row, list | tuple):
            cells.append([_cell(v) for v in row])
        else:
            cells.append([_cell(row)])
    return columns, cells


def _render_table(data: dict[str, Any], budget: int) -> list[dict[str, Any]]:
    columns, rows = table_rows(data)
    width = max([len(columns), *(len(r) for r in rows)], default=0)
    shown = min(width, TABLE_COLUMNS_MAX)
    header = [clip(c, TABLE_CELL_MAX) for c in columns[:shown]] + [""] * (shown - len(columns[:shown]))
    body = [(r + [""] * shown)[:shown] for r in rows]
    widths = [max([len(header[i]), *(len(r[i]) for r in body)]) for i in range(shown)]

    def line(cells: list[str]) -> str:
        return " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    caption_text = f"{count(len(rows), 'rows')} × {count(width, 'columns')}"
    if width > shown:
        caption_text += f" ({more(width - shown, 'columns')} not shown)"
    caption = [rt_section(rt_text("🧮 Table ", bold=True), rt_text(caption_text))]
    head = [line(header), "-+-".join("-" * w for w in widths)] if columns else []
    room = budget - text_length(caption) - len(more(len(rows), "rows"))
    text, _ = take_lines(head, room)
    kept = 0
    for row in body:
        candidate = line(row)
        if len(text) + len(candidate) + 1 > room:
            break
        text = f"{text}\n{candidate}" if text else candidate
        kept += 1
    elements = [*caption, rt_pre(text or " ")]
    if kept < len(rows):
        elements.append(note(more(len(rows) - kept, "rows")))
    return [rich_text(*elements)]


# [label](url "title") and ![alt](url); the url may hold one level of balanced parentheses.
_IMAGE_OR_LINK = re.compile(
    r"!?\[([^\[\]]*)\]"  # [label]
    r"\(\s*<?([^()\s<>]*(?:\([^()\s]*\)[^()\s<>]*)*)>?"  # (url
    r"(?:\s+[\"'(][^\n]*?[\"')])?\s*\)"  # optional "title")
)
# Anywhere, not only at a line's start: inside a list item or a block quote ("- [x]: https://...")
# a definition is just as live, and a bracketed label before a colon loses nothing without brackets.
_REFERENCE_DEF = re.compile(r"()\[([^\]]+)\]:[ \t]*")


def safe_markdown(text: str) -> str:
    """Markdown with every link and image shown as `label (url)`, and HTML/tokens escaped."""
    previous = None
    while previous != text:  # nested links: [![img](a)](b) needs two passes
        previous = text
        text = _IMAGE_OR_LINK.sub(lambda m: f"{m.group(1)} ({m.group(2)})" if m.group(1) else m.group(2), text)
    # Anything still shaped like a link was unusual syntax: a space makes it plain text.
    text = text.replace("](", "] (")
    # Reference definitions ("[x]: https://...") would turn "[label][x]" into a hidden link.
    text = _REFERENCE_DEF.sub(lambda m: f"{m.group(1)}{m.group(2)}: ", text)
    return escape_mrkdwn(text)


def _render_markdown(data: dict[str, Any], budget: int) -> list[dict[str, Any]]:
    source = safe_markdown(str(data.get("text") or ""))
    if not source.strip():
        return [rich_text(note("(empty document)"))]
    room = min(MARKDOWN_BLOCK_MAX, budget)
    if len(source) <= room:
        return [{"type": "markdown", "text": source}]
    marker_room = len(more(len(source), "characters")) + 4
    shown = _cut_markdown(source, room - marker_room)
    marker = more(len(source) - len(shown), "characters")
    return [{"type": "markdown", "text": f"{shown.rstrip()}\n\n_{marker}_"}]


def _cut_markdown(source: str, limit: int) -> str:
    """The head of `source` within `limit`: at a line end if one is near, never inside "&amp;"."""
    head = source[:limit]
    newline = head.rfind("\n")
    if newline > limit // 2:
        return head[:newline]
    amp = head.rfind("&")
    if amp != -1 and ";" not in head[amp:]:
        head = head[:amp]
    return head


def _render_json(data: dict[str, Any], budget: int) -> list[dict[str, Any]]:
    value = data.get("value")
    lines = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str).splitlines()
    return _code_block([], lines, budget)


def _render_json_of_data(data: dict[str, Any], budget: int) -> list[dict[str, Any]]:
    return _render_json({"value": data}, budget)


_RENDERERS = {
    "email": _render_email,
    "diff": _render_diff,
    "table": _render_table,
    "markdown": _render_markdown,
    "json": _render_json,
}
