"""A listener that fails after Slack was answered: the person hears it, instead of nothing (clicks,
forms and commands here; thread messages in bot.agent.run_service, once the thread is known to be Signoff's).

Every listener acks first and works afterwards (bot/process/slack_endpoint.py), so when its work fails (the database
unreachable in a failover, a bug) Slack has long had its answer and shows nothing; the card just
stays as it was and the person cannot tell a lost click from a slow one. The error is logged as
before, and the person gets an ephemeral note (a DM for a form or an App Home click) that says their
input may not have been recorded and what to do. "May": the failure can come after the write (while
the card or a note goes out), so the note sends them to the card rather than claiming either way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from bot.slack.payloads import Click

log = logging.getLogger(__name__)

Tell = Callable[[str, "str | None", str, "str | None"], Awaitable[None]]


class AckTooLate(Exception):
    """A listener acked after Slack's deadline (bot/process/slack_endpoint.py answered 500 and Slack showed an error):
    it stops there, before acting on an input the person was told had failed."""


def failure_text(what: str) -> str:
    return (f"Signoff could not finish handling your {what}: something went wrong on its side. It may not "
            "have been recorded: look at the card (or the thread) before you try again.")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def late_text(what: str) -> str:
    return (f"Signoff took too long to answer Slack (a check it makes waited on Slack or the database), so "
            f"Slack showed an error, and Signoff stopped before acting on your {what}. It may not have been "
            "recorded: look at the card (or the command's result) before you try again.")


def _form_channel(metadata: Any) -> str | None:
    try:
        channel = _dict(json.loads(metadata)).get("channel") if isinstance(metadata, str) else None
    except ValueError:
        return None
    return channel if isinstance(channel, str) and channel else None


def _who_and_where(body: dict[str, Any]) -> tuple[str, str | None, str | None, str] | None:
    """(user, channel, thread_ts, what the person did) of a Slack request, if a person sent it."""
    kind, user = body.get("type"), _dict(body.get("user"))
    if kind == "block_actions" and user.get("id"):
        return str(user["id"]), _dict(body.get("channel")).get("id"), None, "click"
    if kind == "view_submission" and user.get("id"):  # the card's channel, as the form keeps it; else a DM
        return str(user["id"]), _form_channel(_dict(body.get("view")).get("private_metadata")), None, "answer"
    if "command" in body and body.get("user_id"):
        return str(body["user_id"]), body.get("channel_id"), None, "command"
    # Messages are not told here: a failure may come before Signoff knows the thread is one of its own
    # (anyone's thread in any channel the bot is in); bot.agent.run_service tells those it knows.
    return None


async def tell_failure(tell: Tell, body: dict[str, Any], error: BaseException) -> None:
    """Bolt's error handler for every listener (after the ack): tell the person who sent `body`."""
    where = _who_and_where(body)
    if isinstance(error, AckTooLate):
        log.warning("a Slack listener acked too late; its work was not done (%s)", where[3] if where else "")
    else:
        log.error("a Slack listener failed after its ack (%s)", where[3] if where else body.get("type"),
                  exc_info=(type(error), error, error.__traceback__))
    if where is not None:
        user, channel, thread_ts, what = where
        text = late_text(what) if isinstance(error, AckTooLate) else failure_text(what)
        await tell(user, channel, text, thread_ts)


def told_on_failure(listener: Callable[[Click], Awaitable[None]],
                    tell: Tell) -> Callable[[Click], Coroutine[Any, Any, None]]:
    """A click listener run without Bolt (bot/process/slack_endpoint.py's direct clicks), with the same note on failure."""
    async def run(click: Click) -> None:
        try:
            await listener(click)
        except Exception:
            log.exception("a click failed after its ack")
            await tell(click.user_id, click.channel_id, failure_text("click"), None)
    return run
