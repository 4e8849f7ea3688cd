"""What a Slack Web API error means for Signoff, and what the operator should do about it.

Slack answers most failures with HTTP 200 and `{"ok": false, "error": ...}`. They fall in three groups:

- **token** errors (`invalid_auth`, `token_revoked`, `account_inactive`, `missing_scope`, ...): every
  call with this token fails the same way until someone changes the app or the token. Retrying is
  pointless; the fix is in the Slack app's settings and Signoff's environment.
- **channel** errors (`channel_not_found`, `not_in_channel`, `is_archived`): this one channel refuses;
  other channels still work. The fix is in Slack (invite the bot, unarchive) or in the request.
- everything else: transient ones (`ratelimited`, `internal_error`, ...) are retried by the outbox;
  the rest are bugs in what Signoff sent and are not retried either.

`permanent_failure()` turns an error into a `SlackFailure` carrying one line that says what to do.
`SlackHealth` remembers the token's state for `/healthz`: the last token error wins until a call
succeeds again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger(__name__)

# Errors that a later attempt may get past on its own (Slack recovers, the rate limit passes).
TRANSIENT_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)

_APP_PAGE = "https://api.slack.com/apps"
_TOKEN_FIXES = {
    "invalid_auth": "SLACK_BOT_TOKEN is not a valid bot token: copy the Bot User OAuth Token (xoxb-...) from "
                    f"OAuth & Permissions at {_APP_PAGE}, set SLACK_BOT_TOKEN and restart",
    "not_authed": "no token reached Slack: set SLACK_BOT_TOKEN to the Bot User OAuth Token (xoxb-...) and restart",
    "token_revoked": "SLACK_BOT_TOKEN was revoked (the app was uninstalled or the token regenerated): reinstall "
                     f"the app at {_APP_PAGE}, set the new SLACK_BOT_TOKEN and restart",
    "token_expired": "SLACK_BOT_TOKEN has expired (token rotation is on): turn rotation off in the app's "
                     "OAuth & Permissions page, reinstall, set the new SLACK_BOT_TOKEN and restart",
    "account_inactive": "the bot's token belongs to a deactivated bot or workspace: reinstall the app at "
                        f"{_APP_PAGE}, set the new SLACK_BOT_TOKEN and restart",
    "team_access_not_granted": "the token has no access to this workspace: install the app in it and set the "
                               "new SLACK_BOT_TOKEN",
}
_CHANNEL_ERRORS = frozenset({"channel_not_found", "not_in_channel", "is_archived"})


@dataclass(frozen=True)
class SlackFailure:
    """A Slack error no retry will get past. `line` is the one log line: what failed and the fix."""

    method: str
    error: str
    fix: str
    token_wide: bool  # every call with this token fails (vs. one channel)
    channel: str | None = None
    needed: str | None = None  # missing_scope: the scope Slack named

    @property
    def line(self) -> str:
        return f"Slack refused {self.method}: {self.error}; {self.fix}"

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.error, "method": self.method, "message": self.fix}
        if self.channel:
            body["channel"] = self.channel
        if self.needed:
            body["needed_scope"] = self.needed
        return body


def permanent_failure(method: str, error: str, response: dict[str, Any] | None = None,
                      *, channel: str | None = None) -> SlackFailure | None:
    """The failure `error` stands for when no retry can fix it; None if it is not one of those."""
    if error in _TOKEN_FIXES:
        return SlackFailure(method, error, _TOKEN_FIXES[error], token_wide=True)
    if error == "missing_scope":
        needed = str((response or {}).get("needed") or "").strip() or None
        what = f"the scope {needed}" if needed else f"a scope {method} needs"
        fix = (f"the bot token lacks {what}: add it under OAuth & Permissions > Bot Token Scopes at {_APP_PAGE} "
               "(manifest.yml lists every scope Signoff uses), reinstall the app and restart")
        return SlackFailure(method, error, fix, token_wide=True, needed=needed)
    if error in _CHANNEL_ERRORS:
        where = f"channel {channel}" if channel else "the channel"
        fix = {
            "channel_not_found": f"{where} does not exist, or it is private and the bot is not in it: check the "
                                 "channel id, or invite the bot there with /invite @signoff",
            "not_in_channel": f"the bot is not in {where}: invite it there with /invite @signoff",
            "is_archived": f"{where} is archived: unarchive it, or send requests to another channel",
        }[error]
        return SlackFailure(method, error, fix, token_wide=False, channel=channel)
    return None


class SlackHealth:
    """How Slack answered this process lately, for `/healthz` and the start-up check.

    `state` is `unknown` (nothing asked yet), `ok`, `unreachable` (transient: Slack down, timeouts,
    5xx) or `refused` (a token error: nothing will work until the token or the app is fixed).
    `last_undelivered` is the latest request whose card could not be posted, with why.
    """

    def __init__(self) -> None:
        self.state = "unknown"
        self.error: str | None = None
        self.message: str | None = None
        self.since: datetime | None = None
        self.identity: dict[str, str] = {}  # auth.test: team, bot user
        self.last_undelivered: dict[str, Any] | None = None

    def ok(self) -> None:
        if self.state != "ok":
            self.state, self.error, self.message, self.since = "ok", None, None, _now()

    def unreachable(self, error: str) -> None:
        if self.state == "refused":
            return  # a token error says more than an outage; it stays until a call succeeds
        if self.state != "unreachable":
            self.since = _now()
        self.state, self.error, self.message = "unreachable", error, "Slack did not answer; retrying with backoff"

    def refused(self, failure: SlackFailure) -> None:
        if failure.token_wide:
            if self.state != "refused" or self.error != failure.error:
                self.since = _now()
            self.state, self.error, self.message = "refused", failure.error, failure.fix

    def undelivered(self, request_id: str, details: dict[str, Any]) -> None:
        self.last_undelivered = {"request_id": request_id, "at": _iso(_now()), **details}

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"state": self.state}
        if self.error:
            body.update(error=self.error, message=self.message, since=_iso(self.since))
        if self.identity:
            body.update(self.identity)
        if self.last_undelivered:
            body["last_undelivered"] = self.last_undelivered
        return body


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(at: datetime | None) -> str | None:
    return at.isoformat().replace("+00:00", "Z") if at else None


async def connect_socket_mode(handler: Any) -> None:
    """Connect Bolt's Socket Mode handler (in a background task: the HTTP port does not wait for it).

    slack_sdk retries a failed connection by itself, forever, logging two ERRORs and a traceback
    every try; `SocketModeLog` turns each run of failures into one line (a WARNING while Slack does
    not answer, an ERROR naming SLACK_APP_TOKEN when Slack refuses it) and an INFO once connected.
    """
    logger = getattr(getattr(handler, "client", None), "logger", None)
    if isinstance(logger, logging.Logger) and not any(isinstance(f, SocketModeLog) for f in logger.filters):
        logger.addFilter(SocketModeLog())
    await handler.connect_async()


class SocketModeLog(logging.Filter):
    """See `connect_socket_mode`. Rewrites records in place; drops the repeats."""

    # At start-up slack_sdk logs the first two; when a live connection drops and the reconnect is refused,
    # its session monitor logs the third, and the receive loop the fourth (naming apps.connections.open).
    _FAILED = ("Failed to retrieve WSS URL", "Failed to connect", "Failed to check the current session")
    _RECEIVE = "Failed to receive or enqueue a message"

    def __init__(self) -> None:
        super().__init__()
        self.failing = False

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith(self._FAILED) or (message.startswith(self._RECEIVE) and "apps.connections.open" in message):
            if self.failing:
                return False
            self.failing = True
            refused = next((e for e in _TOKEN_FIXES if e in message), None)
            if refused:
                text = (f"Socket Mode: Slack refused SLACK_APP_TOKEN ({refused}): create an app-level token with "
                        "connections:write, set SLACK_APP_TOKEN and restart; Slack's requests do not reach this "
                        "process until then")
                level = logging.ERROR
            else:
                reason = message.split("(url:")[-1].split("status:")[-1].strip(" )").split(")")[0] or "no answer"
                text = f"Socket Mode: cannot connect to Slack (HTTP {reason}); retrying" if reason.isdigit() else (
                    "Socket Mode: cannot connect to Slack; retrying")
                level = logging.WARNING
            record.msg, record.args, record.exc_info, record.exc_text = text, (), None, None
            record.levelno, record.levelname = level, logging.getLevelName(level)
            return True
        if self.failing and "has been established" in message:
            self.failing = False
            record.msg, record.args = "Socket Mode connected", ()
        return True
