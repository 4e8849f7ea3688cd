"""Bad timing is a clear 400 at submit time, and nothing is created."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.app import App

APPROVALS = "/api/v1/approvals"

# (what is wrong, body fields, the field named, words the message must contain)
BAD: list[tuple[str, dict[str, Any], str, str]] = [
    ("words for a duration", {"reminders": {"every": "10 minutes"}}, "reminders.every", "90s, 15m, 4h, 2d"),
    ("a shorthand that is no duration", {"timeout": "soon"}, "timeout.after", "90s, 15m, 4h, 2d"),
    ("a fraction", {"timeout": {"after": "1.5h"}}, "timeout.after", "90s, 15m, 4h, 2d"),
    ("a negative level", {"escalation": {"levels": [{"after": "-5m", "notify": ["UMGR"]}]}},
     "escalation.levels.0.after", "90s, 15m, 4h, 2d"),
    ("zero", {"reminders": "0m"}, "reminders.every", "at least 1s"),
    ("an unknown user group", {"escalation": {"levels": [{"after": "30m", "notify": ["UMGR", "SNOPE"]}]}},
     "escalation.levels.0.notify", "SNOPE is not a user group"),
    ("not a Slack id", {"escalation": {"levels": [{"after": "30m", "notify": ["@manager"]}]}},
     "escalation.levels.0.notify", "not a Slack user id"),
    ("a timeout shorter than the first reminder", {"reminders": "10m", "timeout": "5m"}, "timeout.after",
     "longer than the first reminder"),
    ("a timeout before the first escalation", {"escalation": {"levels": [{"after": "2h", "notify": ["UMGR"]}]},
                                                "timeout": "1h"}, "timeout.after", "first escalation level"),
    ("approve on timeout for a high-risk request", {"timeout": {"after": "1h", "outcome": "approve"}},
     "timeout.outcome", "only policy can make silence approve"),
    ("approve on timeout even at low risk (issue 33)", {"risk": "low", "timeout": {"after": "1h", "outcome": "approve"}},
     "timeout.outcome", "only policy can make silence approve"),
    ("an unknown outcome", {"timeout": {"after": "1h", "outcome": "ignore"}}, "timeout.outcome", "expire"),
    ("an unknown field", {"reminders": {"every": "10m", "count": 3}}, "reminders.count", "unknown field"),
    ("too many reminders", {"reminders": {"every": "10m", "max": 1000}}, "reminders.max", "100"),
    ("a number for a timing", {"timeout": 60}, "timeout", "duration string"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "fields", "field", "words"), BAD, ids=[b[0] for b in BAD])
async def test_bad_timing_is_a_clear_400_and_creates_nothing(
    app: App, what: str, fields: dict[str, Any], field: str, words: str
) -> None:
    app.slack.add_usergroup("SMGRS", ["UMGR"])
    status, body = await app.api("POST", APPROVALS, json=_body(**fields))
    assert status == 400, (what, body)
    error = body["error"]
    assert error["code"] == "invalid_request"
    assert any(d["field"] == field and words in d["message"] for d in error["details"]), (what, error)
    assert field in error["message"] and words in error["message"]
    _, listed = await app.api("GET", APPROVALS)
    assert listed["items"] == [] and app.slack.calls_to("chat.postMessage") == []


async def test_good_timing_is_echoed_and_known_groups_pass(app: App) -> None:
    app.slack.add_usergroup("SMGRS", ["UMGR", "UMGR2"])
    status, body = await app.api("POST", APPROVALS, json=_body(
        risk="low", reminders="15m", timeout={"after": "2d", "outcome": "reject"},
        escalation={"levels": [{"after": "1h", "notify": ["SMGRS"], "add_as_approvers": False},
                               {"after": "90s", "notify": ["U3"]}], "loops": 2}))
    assert status == 201, body
    assert body["timing"] == {
        "reminders": {"every": "15m", "max": 3},
        "escalation": {"levels": [{"after": "1h", "notify": ["SMGRS"], "add_as_approvers": False},
                                  {"after": "1m30s", "notify": ["U3"], "add_as_approvers": True}], "loops": 2},
        "timeout": {"after": "2d", "outcome": "reject"},
    }
    assert body["timers"]["expires_at"] is not None and body["timers"]["escalation_level"] == 0
    status, off = await app.api("POST", APPROVALS, json=_body(reminders=False, escalation=False, timeout=False))
    assert status == 201 and off["timing"] == {"reminders": None, "escalation": None, "timeout": None}


def _body(**fields: Any) -> dict[str, Any]:
    return {"action": {"name": "send_email", "params": {"to": "a@example.com"}}, "summary": "Send it",
            "channel": "C1", "approvers": ["U1"], **fields}
