"""Slack text helpers, in one place: escaping, neutralising agent text, clipping with explicit
markers, mentions, Slack's localised dates, and turning mrkdwn back into plain text.

Everything an agent writes is untrusted: it goes through `neutralise` (plain_text, rich_text) or
`escape_mrkdwn` (mrkdwn) before Slack sees it. Mentions are built only from ids Signoff itself
holds (a payload's user id, a configured approver), never from agent text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime

from slack_sdk.errors import SlackApiError

from bot.access import GroupsUnknown
from bot.domain.values import is_user_id, iso
from bot.slack.failures import permanent_failure

ELLIPSIS = "…"
ZWSP = "\u200b"

# A Slack control sequence: <!channel>, <@U1>, <#C1>, <!subteam^S1>, <https://x|label>, <mailto:..>
_TOKEN_START = re.compile(r"<(?=[!@#]|[A-Za-z][A-Za-z0-9+.\-]*:)")


def escape_mrkdwn(text: str) -> str:
    """Escape Slack's three control characters so mrkdwn shows `text` literally."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def neutralise(text: str) -> str:
    """Break mention and link tokens in text shown as plain_text or rich_text.

    Those surfaces do not parse tokens, so this is defence in depth: it also keeps a token out
    of anything that later copies the text into mrkdwn (a fallback, a log line pasted back).
    The zero-width space is invisible, so the text reads exactly as written.
    """
    return _TOKEN_START.sub("<" + ZWSP, text)


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
