"""Slack ``mrkdwn`` to HTML for the sandbox page: bold, italics, strike, code, code blocks, quotes, links,
mentions and ``<!date^...>``.

Everything that is not markup is HTML-escaped (the page shows agent text). Slack's own escapes
(``&lt; &gt; &amp;``) are undone first, then the text is escaped for HTML, so ``<script>`` written by an
agent shows as text. Links keep only ``http(s):`` and ``mailto:`` targets.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import UTC, datetime

Names = Callable[[str], str]  # a user/group/channel id -> its display name

_CODE_OR_SPECIAL = re.compile(r"(`[^`\n]+`|<[^<>\n]+>)")
_EMPHASIS = [
    (re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])"), "strong"),
    (re.compile(r"(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])"), "em"),
    (re.compile(r"(?<![\w~])~(?=\S)([^~\n]+?)(?<=\S)~(?![\w~])"), "del"),
]
_SAFE_SCHEMES = ("http://", "https://", "mailto:")
AGO_MARK = "\ue000"  # where page.js writes "N minutes ago" (a private-use character: never in Slack's text)


def unslack(text: str) -> str:
    """Undo Slack's three escapes."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def esc(text: str) -> str:
    return html.escape(text, quote=True)


def safe_url(url: str) -> str | None:
    """The URL if its scheme is one a page may link to, else None."""
    return url if url.lower().startswith(_SAFE_SCHEMES) else None


def render(text: str, names: Names) -> str:
    """HTML for one mrkdwn text."""
    out: list[str] = []
    parts = text.split("```")
    for index, part in enumerate(parts):
        if index % 2 == 1 and index < len(parts) - 1:
            out.append(f"<pre>{esc(unslack(part.strip(chr(10))))}</pre>")
        else:
            out.append(_paragraphs(part, names))
    return "".join(out)


def _paragraphs(text: str, names: Names) -> str:
    out: list[str] = []
    quote: list[str] = []
    for line in text.split("\n"):
        if line.startswith(("&gt; ", "> ")) or line in ("&gt;", ">"):
            quote.append(inline(line.split(" ", 1)[1] if " " in line else "", names))
            continue
        if quote:
            out.append("<blockquote>" + "<br>".join(quote) + "</blockquote>")
            quote = []
        out.append(inline(line, names) + "<br>")
    if quote:
        out.append("<blockquote>" + "<br>".join(quote) + "</blockquote>")
    joined = "".join(out)
    return joined[: -len("<br>")] if joined.endswith("<br>") else joined


def inline(text: str, names: Names) -> str:
    """One line of mrkdwn: code spans and <specials> first, then emphasis on what is left."""
    out: list[str] = []
    for piece in _CODE_OR_SPECIAL.split(text):
        if len(piece) > 1 and piece.startswith("`") and piece.endswith("`"):
            out.append(f"<code>{esc(unslack(piece[1:-1]))}</code>")
        elif len(piece) > 1 and piece.startswith("<") and piece.endswith(">"):
            out.append(special(piece[1:-1], names))
        else:
            escaped = esc(unslack(piece))
            for pattern, tag in _EMPHASIS:
                escaped = pattern.sub(rf"<{tag}>\1</{tag}>", escaped)
            out.append(escaped)
    return "".join(out)


def special(inner: str, names: Names) -> str:
    """``<@U1>``, ``<!subteam^S1>``, ``<#C1>``, ``<!here>``, ``<!date^ts^fmt|fallback>``, ``<url|label>``."""
    target, _, label = inner.partition("|")
    if target.startswith("@"):
        return f'<span class="mention">@{esc(names(target[1:]))}</span>'
    if target.startswith("!subteam^"):
        return f'<span class="mention">@{esc(names(target[len("!subteam^"):]))}</span>'
    if target.startswith("#"):
        return f'<span class="mention">#{esc(label or names(target[1:]))}</span>'
    if target in ("!here", "!channel", "!everyone"):
        return f'<span class="mention">@{esc(target[1:])}</span>'
    if target.startswith("!date^"):
        return date_html(target, unslack(label))
    url = safe_url(unslack(target))
    shown = esc(unslack(label or target))
    if url is None:
        return shown
    return f'<a href="{esc(url)}" target="_blank" rel="noopener noreferrer">{shown}</a>'


def date_html(target: str, fallback: str) -> str:
    """A ``<time>``; one that says how long ago (``{ago}``) carries its moment and the rest of its text, so the
    page's clock tick keeps "just now" true as time passes (page.js), with no change of state to refresh it."""
    text = esc(date_text(target, fallback))
    stamp, _, fmt = target.partition("^")[2].partition("^")
    if "{ago}" not in fmt or not stamp.isdigit():
        return f"<time>{text}</time>"
    around = date_text(target.replace("{ago}", AGO_MARK), fallback)
    return f'<time data-ago="{esc(stamp)}" data-fmt="{esc(around)}">{text}</time>' if AGO_MARK in around else f"<time>{text}</time>"


def date_text(target: str, fallback: str, *, now: datetime | None = None) -> str:
    """Slack's date tokens, in UTC (Slack uses the reader's time zone)."""
    _, _, rest = target.partition("^")
    stamp, _, fmt = rest.partition("^")
    fmt = fmt.split("^")[0]
    try:
        when = datetime.fromtimestamp(int(stamp), UTC)
    except (ValueError, OverflowError, OSError):
        return fallback
    now = now or datetime.now(UTC)
    day = when.date()
    pretty = {now.date(): "today"}.get(day) or ("yesterday" if (now.date() - day).days == 1 else None)
    seconds = int((now - when).total_seconds())
    ago = _ago(seconds)
    tokens = {
        "{date_num}": when.strftime("%Y-%m-%d"),
        "{date}": when.strftime("%B %-d, %Y"),
        "{date_short}": when.strftime("%b %-d, %Y"),
        "{date_long}": when.strftime("%A, %B %-d, %Y"),
        "{date_pretty}": pretty or when.strftime("%B %-d, %Y"),
        "{date_short_pretty}": pretty or when.strftime("%b %-d, %Y"),
        "{date_long_pretty}": pretty or when.strftime("%A, %B %-d, %Y"),
        "{time}": when.strftime("%H:%M"),
        "{time_secs}": when.strftime("%H:%M:%S"),
        "{ago}": ago,
    }
    for token, value in tokens.items():
        fmt = fmt.replace(token, value)
    return fmt if "{" not in fmt else fallback


def _ago(seconds: int) -> str:
    if seconds < 0:
        return "in the future"
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''} ago"
    return "just now"
