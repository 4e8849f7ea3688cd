"""Block Kit to HTML for the sandbox page: header, section (text, fields, accessory), context, divider,
actions (buttons with styles, selects), input blocks and their elements, rich text, markdown, image.

Interactive elements carry ``data-block``/``data-action``/``data-type`` so the page's script can send
what was clicked and what the form holds; the server turns that into Slack's payload (see actions.py).
Every string from a block is escaped; unknown block types render as a note, never as raw markup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.sandbox.page import mrkdwn
from bot.sandbox.page.mrkdwn import esc


@dataclass(frozen=True)
class Ctx:
    names: mrkdwn.Names
    users: list[tuple[str, str]]  # (id, name) for users_select


def text_html(obj: Any, ctx: Ctx) -> str:
    """A text object (plain_text or mrkdwn) as HTML."""
    if not isinstance(obj, dict):
        return esc(str(obj or ""))
    raw = str(obj.get("text", ""))
    if obj.get("type") == "mrkdwn":
        return mrkdwn.render(raw, ctx.names)
    return esc(raw).replace("\n", "<br>")


def plain(obj: Any) -> str:
    return esc(str(obj.get("text", "")) if isinstance(obj, dict) else str(obj or ""))


def blocks_html(blocks: list[dict[str, Any]], ctx: Ctx, errors: dict[str, str] | None = None) -> str:
    return "".join(block_html(b, ctx, (errors or {}).get(str(b.get("block_id", "")))) for b in blocks)


def block_html(block: dict[str, Any], ctx: Ctx, error: str | None = None) -> str:
    kind = block.get("type")
    render = _BLOCKS.get(str(kind))
    if render is None:
        return f'<div class="blk unknown">[{esc(str(kind))} block]</div>'
    return render(block, ctx, error)


def _header(b: dict[str, Any], ctx: Ctx, _e: str | None) -> str:
    return f'<div class="blk header">{plain(b.get("text"))}</div>'


def _section(b: dict[str, Any], ctx: Ctx, _e: str | None) -> str:
    inner = f'<div class="text">{text_html(b["text"], ctx)}</div>' if b.get("text") else ""
    if b.get("fields"):
        inner += '<div class="fields">' + "".join(
            f'<div class="field">{text_html(f, ctx)}</div>' for f in b["fields"]) + "</div>"
    accessory = f'<div class="accessory">{element_html(b["accessory"], b, ctx)}</div>' if b.get("accessory") else ""
    return f'<div class="blk section" data-block="{esc(str(b.get("block_id", "")))}">{inner}{accessory}</div>'


def _context(b: dict[str, Any], ctx: Ctx, _e: str | None) -> str:
    parts = []
    for el in b.get("elements", []):
        if el.get("type") == "image":
            parts.append(f'<span class="ctx-img" title="{esc(str(el.get("alt_text", "")))}">▪</span>')
        else:
            parts.append(f"<span>{text_html(el, ctx)}</span>")
    return f'<div class="blk context">{"".join(parts)}</div>'


def _divider(b: dict[str, Any], ctx: Ctx, _e: str | None) -> str:
    return '<hr class="blk divider">'


def _actions(b: dict[str, Any], ctx: Ctx, _e: str | None) -> str:
    els = "".join(element_html(el, b, ctx) for el in b.get("elements", []))
    return f'<div class="blk actions" data-block="{esc(str(b.get("block_id", "")))}">{els}</div>'


def _input(b: dict[str, Any], ctx: Ctx, error: str | None) -> str:
    el = b.get("element", {})
    optional = ' <span class="optional">(optional)</span>' if b.get("optional") else ""
    hint = f'<div class="hint">{plain(b["hint"])}</div>' if b.get("hint") else ""
    err = f'<div class="error" role="alert">{esc(error)}</div>' if error else ""
    return (f'<div class="blk input" data-block="{esc(str(b.get("block_id", "")))}">'
            f'<label>{plain(b.get("label"))}{optional}</label>{element_html(el, b, ctx)}{hint}{err}</div>')


def _markdown(b: dict[str, Any], ctx: Ctx, _e: str | None) -> str:
    return f'<div class="blk markdown">{mrkdwn.render(str(b.get("text", "")), ctx.names)}</div>'


def _image(b: dict[str, Any], ctx: Ctx, _e: str | None) -> str:
    return f'<div class="blk image">[image: {esc(str(b.get("alt_text", "")))}]</div>'


def _rich_text(b: dict[str, Any], ctx: Ctx, _e: str | None) -> str:
    return f'<div class="blk rich">{"".join(_rich_part(p, ctx) for p in b.get("elements", []))}</div>'


def _rich_part(part: dict[str, Any], ctx: Ctx) -> str:
    kind = part.get("type")
    inner = "".join(_rich_el(e, ctx) for e in part.get("elements", []) if e.get("type") != "rich_text_section")
    if kind == "rich_text_section":
        return f"<div>{inner}</div>"
    if kind == "rich_text_preformatted":
        return f"<pre>{inner}</pre>"
    if kind == "rich_text_quote":
        return f"<blockquote>{inner}</blockquote>"
    if kind == "rich_text_list":
        tag = "ol" if part.get("style") == "ordered" else "ul"
        items = "".join(f"<li>{_rich_part(s, ctx)}</li>" for s in part.get("elements", []))
        return f"<{tag}>{items}</{tag}>"
    return ""


def _rich_el(el: dict[str, Any], ctx: Ctx) -> str:
    kind = el.get("type")
    if kind == "text":
        out = esc(str(el.get("text", ""))).replace("\n", "<br>")
    elif kind == "link":
        url = mrkdwn.safe_url(str(el.get("url", "")))
        label = esc(str(el.get("text") or el.get("url", "")))
        out = f'<a href="{esc(url)}" target="_blank" rel="noopener noreferrer">{label}</a>' if url else label
    elif kind == "user":
        out = f'<span class="mention">@{esc(ctx.names(str(el.get("user_id", ""))))}</span>'
    elif kind == "usergroup":
        out = f'<span class="mention">@{esc(ctx.names(str(el.get("usergroup_id", ""))))}</span>'
    elif kind == "channel":
        out = f'<span class="mention">#{esc(ctx.names(str(el.get("channel_id", ""))))}</span>'
    elif kind == "broadcast":
        out = f'<span class="mention">@{esc(str(el.get("range", "")))}</span>'
    elif kind == "emoji":
        out = esc(str(el.get("unicode") and chr(int(str(el["unicode"]).split("-")[0], 16)) or f":{el.get('name')}:"))
    elif kind == "date":
        target = "!date^{}^{}".format(el.get("timestamp"), el.get("format", ""))
        out = mrkdwn.date_html(target, str(el.get("fallback", "")))
    else:
        return ""
    style = el.get("style") or {}
    for key, tag in (("code", "code"), ("bold", "strong"), ("italic", "em"), ("strike", "del")):
        if style.get(key):
            out = f"<{tag}>{out}</{tag}>"
    return out


_BLOCKS: dict[str, Callable[[dict[str, Any], Ctx, str | None], str]] = {
    "header": _header, "section": _section, "context": _context, "divider": _divider, "actions": _actions,
    "input": _input, "markdown": _markdown, "image": _image, "rich_text": _rich_text,
}


def element_html(el: dict[str, Any], block: dict[str, Any], ctx: Ctx) -> str:
    """One interactive element; its data attributes say which block/action it is."""
    kind = str(el.get("type", ""))
    attrs = (f'data-block="{esc(str(block.get("block_id", "")))}" data-action="{esc(str(el.get("action_id", "")))}" '
             f'data-type="{esc(kind)}"')
    if kind == "button":
        style = el.get("style") if el.get("style") in ("primary", "danger") else "default"
        confirm = el.get("confirm")
        data_confirm = f' data-confirm="{esc(str((confirm.get("text") or {}).get("text", "")))}"' if confirm else ""
        url = mrkdwn.safe_url(str(el.get("url", ""))) if el.get("url") else None
        if url:
            return f'<a class="btn {style}" href="{esc(url)}" target="_blank" rel="noopener noreferrer">{plain(el.get("text"))}</a>'
        return (f'<button type="button" class="btn {style}" {attrs} data-value="{esc(str(el.get("value", "")))}"'
                f'{data_confirm}>{plain(el.get("text"))}</button>')
    if kind == "plain_text_input" or kind == "rich_text_input":
        value = esc(str(el.get("initial_value", "")))
        ph = f' placeholder="{plain(el["placeholder"])}"' if el.get("placeholder") else ""
        limits = "".join(f' {a}="{int(el[k])}"' for k, a in (("max_length", "maxlength"), ("min_length", "minlength"))
                         if isinstance(el.get(k), int))
        if el.get("multiline") or kind == "rich_text_input":
            return f"<textarea {attrs}{ph}{limits} rows=\"4\">{value}</textarea>"
        return f'<input type="text" {attrs}{ph}{limits} value="{value}">'
    if kind in ("number_input", "email_text_input", "url_text_input", "datepicker", "timepicker", "datetimepicker"):
        return _simple_input(kind, el, attrs)
    if kind in ("static_select", "multi_static_select", "users_select", "multi_users_select"):
        return _select(kind, el, attrs, ctx)
    if kind in ("checkboxes", "radio_buttons"):
        return _choices(kind, el, attrs, block, ctx)
    if kind == "overflow":
        return _select(kind, el, attrs, ctx)
    return f'<span class="unknown">[{esc(kind)}]</span>'


def _simple_input(kind: str, el: dict[str, Any], attrs: str) -> str:
    html_type = {"number_input": "number", "email_text_input": "email", "url_text_input": "url",
                 "datepicker": "date", "timepicker": "time", "datetimepicker": "datetime-local"}[kind]
    initial = el.get("initial_value") or el.get("initial_date") or el.get("initial_time") or ""
    extra = ""
    if kind == "number_input":
        extra = ' step="any"' if el.get("is_decimal_allowed") else ' step="1"'
        extra += "".join(f' {a}="{esc(str(el[k]))}"' for k, a in (("min_value", "min"), ("max_value", "max")) if k in el)
    return f'<input type="{html_type}" {attrs}{extra} value="{esc(str(initial))}">'


def _options(el: dict[str, Any]) -> list[dict[str, Any]]:
    found = list(el.get("options") or [])
    for group in el.get("option_groups") or []:
        found.extend(group.get("options") or [])
    return found


def _select(kind: str, el: dict[str, Any], attrs: str, ctx: Ctx) -> str:
    multiple = " multiple" if kind.startswith("multi_") else ""
    if kind.endswith("users_select"):
        chosen = {el.get("initial_user"), *(el.get("initial_users") or [])}
        opts = "".join(f'<option value="{esc(uid)}"{" selected" if uid in chosen else ""}>{esc(name)}</option>'
                       for uid, name in ctx.users)
    else:
        chosen = {o.get("value") for o in [el.get("initial_option") or {}, *(el.get("initial_options") or [])]}
        opts = "".join(f'<option value="{esc(str(o.get("value", "")))}"'
                       f'{" selected" if o.get("value") in chosen else ""}>{plain(o.get("text"))}</option>'
                       for o in _options(el))
    placeholder = plain(el.get("placeholder")) if el.get("placeholder") else "Select…"
    blank = "" if multiple else f'<option value="">{placeholder}</option>'
    return f"<select {attrs}{multiple}>{blank}{opts}</select>"


def _choices(kind: str, el: dict[str, Any], attrs: str, block: dict[str, Any], ctx: Ctx) -> str:
    html_type = "checkbox" if kind == "checkboxes" else "radio"
    chosen = {o.get("value") for o in [el.get("initial_option") or {}, *(el.get("initial_options") or [])]}
    name = esc(f'{block.get("block_id", "")}/{el.get("action_id", "")}')
    items = []
    for o in el.get("options") or []:
        desc = f'<div class="hint">{text_html(o["description"], ctx)}</div>' if o.get("description") else ""
        checked = " checked" if o.get("value") in chosen else ""
        items.append(f'<label class="choice"><input type="{html_type}" name="{name}" '
                     f'value="{esc(str(o.get("value", "")))}"{checked}> {text_html(o.get("text"), ctx)}{desc}</label>')
    return f'<div class="choices" {attrs}>{"".join(items)}</div>'
