"""The base values every part of the domain shares: statuses, outcomes, channels of decision, risk.

Nothing here imports anything of the project, so every domain module can import it without cycles.
"""

from __future__ import annotations

import enum
import re
from datetime import datetime


class Status(enum.StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    ANSWERED = "answered"


class Outcome(enum.StrEnum):
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    ANSWERED = "answered"


class Via(enum.StrEnum):
    BUTTON = "button"
    MODAL = "modal"
    POLICY = "policy"
    GRANT = "grant"
    TIMEOUT = "timeout"
    API = "api"
    THREAD = "thread"  # a reply in the Slack thread (answers to an agent's questions)
    REPLY = "reply"  # "Reply instead": a rejection whose comment answers in place of the action


class Risk(enum.StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class Kind(enum.StrEnum):
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

