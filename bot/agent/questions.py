"""Clarifying questions: the `ask_human` tool, question requests, and their answers.

A question request is a `Request` of kind `question` whose action is `ask_human` with
params {"questions": [...]}: 1-4 questions, each with 2-4 options and an optional
`multi_select`. Its decision (outcome `answered`) carries params
{"answers": [{"question", "selected": [labels], "text": free text or null}]}.
The same request serves the agent runner (card in the run's thread) and external agents
(`POST /api/v1/questions`).
"""

from __future__ import annotations

from typing import Any

from bot.agent.tools import Tool
from bot.domain.model import Action, Kind, Risk
from bot.approvals.service import ApprovalSpec
from bot.slack.previews import clip, one_line

ASK_HUMAN = "ask_human"
MAX_QUESTIONS = 4
MIN_OPTIONS, MAX_OPTIONS = 2, 4
LABEL_MAX = 75
DESCRIPTION_MAX = 150
QUESTION_MAX = 2000
HEADER_MAX = 50

OPTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "minLength": 1, "maxLength": LABEL_MAX, "description": "the choice, short"},
        "description": {"type": "string", "maxLength": DESCRIPTION_MAX, "description": "what choosing it means"},
    },
    "required": ["label"],
    "additionalProperties": False,
}
QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 1, "maxLength": QUESTION_MAX},
        "header": {"type": "string", "maxLength": HEADER_MAX, "description": "a very short topic label"},
        "options": {"type": "array", "minItems": MIN_OPTIONS, "maxItems": MAX_OPTIONS, "items": OPTION_SCHEMA},
        "multi_select": {"type": "boolean", "description": "true if several options may be chosen"},
    },
    "required": ["question", "options"],
    "additionalProperties": False,
}
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "questions": {"type": "array", "minItems": 1, "maxItems": MAX_QUESTIONS, "items": QUESTION_SCHEMA},
    },
    "required": ["questions"],
    "additionalProperties": False,
}

ask_human_tool = Tool(
    name=ASK_HUMAN,
    description=(
        "Ask the people supervising this run 1-4 clarifying questions, each with 2-4 options. "
        "They answer with buttons or in their own words; the answer comes back as this tool's result. "
        "Use it when the task is ambiguous instead of guessing."
    ),
    input_schema=INPUT_SCHEMA,
    risk=Risk.LOW,
    idempotent=True,
    kind="question",
)


def check_questions(questions: list[dict[str, Any]]) -> str | None:
    """What the schema cannot say: option labels must be unique within a question."""
    for number, question in enumerate(questions, 1):
        labels = [str(o.get("label", "")).strip().lower() for o in question.get("options", [])]
        if len(set(labels)) != len(labels):
            return f"question {number}: option labels must be different from each other"
    return None


def question_spec(
    questions: list[dict[str, Any]],
    *,
    channel: str,
    thread_ts: str | None = None,
    summary: str | None = None,
    context: str | None = None,
    requested_by: str | None = None,
    callback_url: str | None = None,
    approvers: tuple[str, ...] = (),
    approver_users: tuple[str, ...] = (),
    extra: dict[str, Any] | None = None,
) -> ApprovalSpec:
    first = one_line(str(questions[0].get("question", ""))) if questions else "A question"
    return ApprovalSpec(
        action=Action(ASK_HUMAN, {"questions": questions}),
        summary=clip(one_line(summary) if summary else first, 300),
        risk=Risk.LOW,
        channel=channel,
        context=context,
        approvers=approvers,
        approver_users=approver_users,
        callback_url=callback_url,
        requested_by=requested_by,
        extra=dict(extra or {}),
        kind=Kind.QUESTION,
        thread_ts=thread_ts,
    )
