"""Slack text helpers, in one place: escaping, neutralising agent text, clipping with explicit
markers, mentions, Slack's localised dates, and turning mrkdwn back into plain text.

Everything an agent writes is untrusted: it goes through `neutralise` (plain_text, rich_text) or
`escape_mrkdwn` (mrkdwn) before Slack sees it. Mentions are built only from ids Signoff itself
holds (a payload's user id, a configured approver), never from agent text.

Both first make invisible characters visible (`visible`): a right-to-left override, a zero-width
space or any other format control would let `invoice.pdf` and `fdp.exe` look alike, or hide a word,
on a card a person approves. Each run of one such character becomes a marker naming it, `⟨U+202E⟩`
or `⟨U+200B×3⟩`. (Text that spells a marker shows as one: it can warn of a character that is not
there, never hide one.) An edit form's initial value uses `editable`, which also writes a literal `⟨`
as `⟨U+27E8⟩`, so `from_editable` gives back exactly the original text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime

from slack_sdk.errors import SlackApiError

from bot.approvals.access import GroupsUnknown
from bot.domain.values import is_user_id, iso
from bot.slack.failures import permanent_failure

ELLIPSIS = "…"
ZWSP = "\u200b"

# A Slack control sequence: <!channel>, <@U1>, <#C1>, <!subteam^S1>, <https://x|label>, <mailto:..>
_TOKEN_START = re.compile(r"<(?=[!@#]|[A-Za-z][A-Za-z0-9+.\-]*:)")

# Invisible characters: every format control (Unicode category Cf: bidi embeddings, overrides and
# isolates, zero-width space/joiners, word joiner, invisible operators, BOM, the Arabic letter mark,
# tags), and letters and marks that draw nothing (combining grapheme joiner, Hangul fillers).
# tests/slack/test_visible_text.py checks this covers every Cf character Python knows.
_INVISIBLE_CLASS = (
    "\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u180e"
    "\u200c-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"
) + ZWSP
_MARK_OPEN, _MARK_CLOSE = "\u27e8", "\u27e9"  # ⟨ ⟩
# An invisible character. The zero-width space `neutralise` puts after a "<" is left as it is, so
# text shown twice over (neutralised, then put in a plain_text object) reads the same.
_HIDDEN = re.compile("(?<!<)" + ZWSP + "|[" + _INVISIBLE_CLASS.removesuffix(ZWSP) + "]")
_HIDDEN_OR_OPEN = re.compile("[" + _INVISIBLE_CLASS + _MARK_OPEN + "]")  # for `editable`: exact
_MARKER = re.compile(_MARK_OPEN + r"U\+([0-9A-F]{4,6})(?:\u00d7([1-9][0-9]{0,6}))?" + _MARK_CLOSE)
_INVISIBLE = re.compile("[" + _INVISIBLE_CLASS + "]")
_ZWJ = "\u200d"
# Emoji joined by a zero-width joiner (👩‍💻) draw as one picture: that joiner is not hidden.
_PICTURE = re.compile("[\u2600-\u27bf\u2b00-\u2bff\ufe0f\U0001f000-\U0001faff]")


def visible(text: str) -> str:
    """`text` with every run of one invisible character replaced by a marker: `⟨U+202E⟩`, `⟨U+200B×3⟩`."""
    return _marked(text, _HIDDEN)


def editable(text: str) -> str:
    """`visible`, and a literal `⟨` written `⟨U+27E8⟩`: what an edit form shows, read back by `from_editable`."""
    return _marked(text, _HIDDEN_OR_OPEN)


def _marked(text: str, hidden: re.Pattern[str]) -> str:
    if not hidden.search(text):
        return text  # the usual case: one scan, no copy
    out: list[str] = []
    at = 0
    for found in hidden.finditer(text):
        start = found.start()
        if start < at:
            continue  # inside a run already marked
        char = text[start]
        if char == _ZWJ and start > 0 and _PICTURE.match(text, start - 1) and _PICTURE.match(text, start + 1):
            continue
        end = start + 1
        while end < len(text) and text[end] == char:
            end += 1
        run = end - start
        out.append(text[at:start])
        out.append(f"{_MARK_OPEN}U+{ord(char):04X}{f'×{run}' if run > 1 else ''}{_MARK_CLOSE}")
        at = end
    out.append(text[at:])
    return "".join(out)


def from_editable(text: str) -> str:
    """The text `editable` was given: each marker back to the characters it names (others stay as typed)."""
    def back(found: re.Match[str]) -> str:
        char = chr(int(found.group(1), 16)) if int(found.group(1), 16) <= 0x10FFFF else ""
        if not (char == _MARK_OPEN or _INVISIBLE.fullmatch(char)):
            return found.group(0)
        return char * int(found.group(2) or 1)

    return _MARKER.sub(back, text) if _MARK_OPEN in text else text


def escape_mrkdwn(text: str) -> str:
    """Escape Slack's three control characters so mrkdwn shows `text` literally; invisible ones made visible."""
    return visible(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def neutralise(text: str) -> str:
    """Make invisible characters visible, and break mention and link tokens, in text shown as
    plain_text or rich_text.

    Those surfaces do not parse tokens, so this is defence in depth: it also keeps a token out
    of anything that later copies the text into mrkdwn (a fallback, a log line pasted back).
    The zero-width space is invisible, so the text reads exactly as written.
    """
    return _TOKEN_START.sub("<" + ZWSP, visible(text))


def count(n: int, noun: str) -> str:
    """ "1 row", "5,000 rows" (`noun` given in the plural)."""
    return f"{n:,} {noun if n != 1 else noun.removesuffix('s')}"


def more(n: int, noun: str) -> str:
    """The explicit truncation marker: "… 12 more lines"."""
    return f"{ELLIPSIS} {n:,} more {noun if n != 1 else noun.removesuffix('s')}"


def cut(text: str, limit: int) -> str:
    """`text` if it fits in `limit` characters, else its head plus "… N more characters"."""
    if len(text) <= limit:
        return text
    # Size the marker for the worst case first; the real count can only be smaller.
    keep = max(0, limit - len(more(len(text), "characters")) - 1)
    return text[:keep] + "\n" * (keep > 0) + more(len(text) - keep, "characters")


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with a bare "…" (for labels, cells and headers)."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + ELLIPSIS


def one_line(text: str) -> str:
    return " ".join(text.split())


def mention(entry: str) -> str:
    """A Slack mention of a user (U/W) or user group (S) id."""
    return f"<!subteam^{entry}>" if entry.startswith("S") else f"<@{entry}>"


def mentions(entries: Iterable[str], *, limit: int = 10) -> str:
    """Mentions of up to `limit` of `entries`, comma-separated, with "…" when some were left out."""
    listed = list(entries)
    return ", ".join(mention(e) for e in listed[:limit]) + (ELLIPSIS if len(listed) > limit else "")


def groups_unknown_text(exc: GroupsUnknown, what: str) -> str:
    """Why a person's `what` was not recorded: Slack could not say who is in the groups it rests on.
    A refusal no retry gets past (the token lacks usergroups:read) says so, with the fix to pass on."""
    for error in exc.errors:
        if isinstance(error, SlackApiError):
            failure = permanent_failure("usergroups.users.list", str(error.response.get("error")),
                                        dict(error.response.data) if isinstance(error.response.data, dict) else None)
            if failure is not None and failure.token_wide:
                return (f"Slack refuses to tell Signoff who is in {mentions(exc.groups)} ({failure.error}), so it "
                        f"cannot check that you may do this, and your {what} was not recorded. Trying again will "
                        f"not help until whoever runs Signoff fixes this: {failure.fix}.")
    return (f"Slack did not say who is in {mentions(exc.groups)} just now, so Signoff could not check that you "
            f"may do this, and your {what} was not recorded. Try again in a moment.")


def is_user(value: str | None) -> bool:
    """A Slack user id (U.../W...): safe to mention. Anything else (an agent's name) is not."""
    return bool(value) and is_user_id(value)  # type: ignore[arg-type]



def slack_date(at: datetime, token: str) -> str:
    """Slack's localised date syntax, with the ISO time as the fallback text."""
    unix = int(at.replace(tzinfo=at.tzinfo or UTC).timestamp())
    return f"<!date^{unix}^{token}|{iso(at)}>"


def when(at: datetime | None) -> str:
    """"Mon, Nov 30 at 14:02" in the reader's own time zone (UTC in the fallback); "never" for None."""
    if at is None:
        return "never"
    at = at.replace(tzinfo=at.tzinfo or UTC)
    return f"<!date^{int(at.timestamp())}^{{date_short_pretty}} at {{time}}|{at:%Y-%m-%d %H:%M} UTC>"


def strip_markup(text: str, *, limit: int = 2000) -> str:
    """Plain text from our own mrkdwn (modal errors are plain): dates and mentions to their fallbacks."""
    text = re.sub(r"<!date\^[^|>]*\|([^>]*)>", r"\1", text)
    text = re.sub(r"<@([A-Z0-9]+)>", r"@\1", text)
    text = re.sub(r"<!subteam\^([A-Z0-9]+)>", r"@\1", text)
    return text[:limit]


# What a person typed, as Slack delivers it in a message event or an escaped slash command:
# <@U1|name> / <@U1>, <#C1|name>, <!subteam^S1|@team>, <!here>, <https://x|label> / <https://x>.
_INBOUND_TOKEN = re.compile(r"<([^<>]*)>")


def _readable(token: str) -> str:
    target, _, label = token.partition("|")
    if target.startswith("@"):
        return "@" + (label or target[1:])
    if target.startswith("#"):
        return "#" + (label or target[1:])
    if target.startswith("!subteam^"):
        return label or "@" + target[len("!subteam^"):]
    if target.startswith("!date^"):
        return label
    if target.startswith("!"):
        return "@" + target[1:]
    if target.startswith("mailto:"):
        return label or target[len("mailto:"):]
    if label and label != target:
        return f"{label} ({target})"
    return target


def from_slack(text: str) -> str:
    """Plain text from what a person typed in Slack, for an agent or a typed answer.

    Slack escapes `&`, `<` and `>` in every message and slash command and wraps mentions, channels
    and links in `<...>`; an answer "Smith & Sons" arrives as "Smith &amp; Sons". Tokens become
    their readable form ("@bob", "#ops", "label (url)"), then the three escapes are undone (in
    that order, so a typed "&lt;" stays "&lt;").
    """
    text = _INBOUND_TOKEN.sub(lambda m: _readable(m.group(1)), text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
