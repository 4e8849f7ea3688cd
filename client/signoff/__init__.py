"""The agent side of Signoff: what agent code imports to ask a person in Slack.

    from signoff import SignoffClient, require_approval

Talks to a Signoff server over HTTP only (httpx); never imports the server's packages.
Framework adapters (`signoff.claude`, `signoff.mcp_server`, `signoff.langgraph`, `signoff.dbos`, `signoff.openai`,
`signoff.pydantic_ai`) import their framework lazily.

The names below are imported when first used: `signoff hook claude-code` runs once per tool call and
needs none of them (nor httpx and pydantic, which they bring).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from signoff.client import AsyncSignoffClient, AsyncSubmission, SignoffClient, Submission
    from signoff.decorator import require_approval
    from signoff.errors import (
        Cancelled,
        Expired,
        ParamsChanged,
        Rejected,
        SignatureInvalid,
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

_WHERE = {
    "AsyncSignoffClient": "client", "AsyncSubmission": "client", "SignoffClient": "client", "Submission": "client",
    "require_approval": "decorator",
    "Cancelled": "errors", "Expired": "errors", "ParamsChanged": "errors", "Rejected": "errors",
    "SignatureInvalid": "errors", "StateChanged": "errors", "SignoffError": "errors", "SignoffRequestError": "errors", "SignoffUnavailable": "errors",
    "StillPending": "errors", "UndeliverableError": "errors", "WebhookRefused": "errors",
    "Actor": "models", "Answer": "models", "Answers": "models", "Change": "models", "Decision": "models",
    "ItemDecision": "models",
    "ResumeClaim": "resumes", "ResumeTaken": "resumes",
}

__all__ = [
    "Actor", "Answer", "Answers", "AsyncSignoffClient", "AsyncSubmission", "Cancelled", "Change", "Decision",
    "Expired", "ItemDecision", "ParamsChanged", "Rejected", "ResumeClaim", "ResumeTaken", "SignatureInvalid",
    "SignoffClient", "SignoffError", "SignoffRequestError", "SignoffUnavailable", "StateChanged", "StillPending",
    "Submission", "UndeliverableError", "WebhookRefused",
    "require_approval",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'signoff' has no attribute {name!r}")
    value = getattr(import_module(f"signoff.{module}"), name)
    globals()[name] = value  # once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
