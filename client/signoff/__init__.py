"""The agent side of Signoff: what agent code imports to ask a person in Slack.

    from signoff import SignoffClient, require_approval

Talks to a Signoff server over HTTP only (httpx); never imports the server's packages.
Framework adapters (`signoff.claude`, `signoff.mcp_server`, `signoff.langgraph`, `signoff.dbos`) import their
framework lazily.
"""

from __future__ import annotations

from signoff.client import AsyncSignoffClient, AsyncSubmission, SignoffClient, Submission
from signoff.decorator import require_approval
from signoff.errors import (
    Cancelled,
    Expired,
    ParamsChanged,
    Rejected,
    SignoffError,
    SignoffRequestError,
    SignoffUnavailable,
    StateChanged,
    StillPending,
    UndeliverableError,
    WebhookRefused,
)
from signoff.models import Actor, Answer, Answers, Change, Decision, ItemDecision
from signoff.resumes import ResumeClaim, ResumeTaken

__all__ = [
    "Actor", "Answer", "Answers", "AsyncSignoffClient", "AsyncSubmission", "Cancelled", "Change", "Decision",
    "Expired", "ItemDecision", "ParamsChanged", "Rejected", "ResumeClaim", "ResumeTaken", "SignoffClient", "SignoffError",
    "SignoffRequestError", "SignoffUnavailable", "StateChanged", "StillPending", "Submission", "UndeliverableError", "WebhookRefused",
    "require_approval",
]
