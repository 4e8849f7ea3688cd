"""The base values every part of the domain shares: statuses, outcomes, channels of decision, risk.

Nothing here imports anything of the project, so every domain module can import it without cycles.
"""

from __future__ import annotations

import enum
import re
from datetime import datetime


class Status(enum.StrEnum):
    """Where a request stands: pending, then one final status for good."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    ANSWERED = "answered"


class Outcome(enum.StrEnum):
    """How a decision ended a request: the final statuses (every `Status` but pending)."""

    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    ANSWERED = "answered"


class Via(enum.StrEnum):
    """How a decision was made: a person (button, modal, thread, reply), a policy, a grant, the clock
    (timeout) or the API."""

    BUTTON = "button"
    MODAL = "modal"
    POLICY = "policy"
    GRANT = "grant"
    TIMEOUT = "timeout"
    API = "api"
    THREAD = "thread"  # a reply in the Slack thread (answers to an agent's questions)
    REPLY = "reply"  # "Reply instead": a rejection whose comment answers in place of the action


class Risk(enum.StrEnum):
    """How risky an action is, from low to critical (as the agent or a policy tier rates it)."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class Kind(enum.StrEnum):
    """What a request asks for: an approval of an action, or answers to questions."""

    APPROVAL = "approval"
    QUESTION = "question"


def iso(dt: datetime | None) -> str | None:
    if dt is None:
        return None
    return dt.isoformat().replace("+00:00", "Z")


def from_iso(text: object) -> datetime:
    """The datetime `iso` wrote."""
    return datetime.fromisoformat(str(text).replace("Z", "+00:00"))


_USER_ID = re.compile(r"^[UW][A-Z0-9]{1,39}$")
CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{1,39}$")  # a channel, private channel or DM
APPROVER_ID = re.compile(r"^[UWS][A-Z0-9]{1,39}$")  # a person or a user group


def is_user_id(value: str) -> bool:
    """A Slack user id (U... or W...)."""
    return bool(_USER_ID.match(value))

