"""Questions and their answers, read from a question request: pure functions over `Request`.

A question request's params are {"questions": [{"question", "header"?, "options": [{"label",
"description"?}], "multi_select"?}]}; its decision's params are {"answers": [{"question",
"selected": [labels], "text": free text or null}]}.
"""

from __future__ import annotations

from typing import Any

from bot.domain.model import Request


def questions_of(request: Request) -> list[dict[str, Any]]:
    questions = request.action.params.get("questions")
    return questions if isinstance(questions, list) else []


def answers_from_choices(request: Request, choices: dict[int, list[int]]) -> list[dict[str, Any]]:
    """Answers from chosen option indexes per question index."""
    answers = []
    for i, question in enumerate(questions_of(request)):
        options = question.get("options") or []
        picked = [options[j]["label"] for j in choices.get(i, []) if 0 <= j < len(options)]
        answers.append({"question": question.get("question"), "selected": picked, "text": None})
    return answers


def answers_from_text(request: Request, text: str) -> list[dict[str, Any]]:
    """One free-text reply answers every question of the request."""
    return [{"question": q.get("question"), "selected": [], "text": text} for q in questions_of(request)]


def answers_of(request: Request) -> list[dict[str, Any]] | None:
    if request.decision is None:
        return None
    answers = request.decision.params.get("answers")
    return answers if isinstance(answers, list) else None


def answer_line(answer: dict[str, Any]) -> str:
    selected = answer.get("selected") or []
    parts = [", ".join(str(s) for s in selected)] if selected else []
    if answer.get("text"):
        parts.append(f'"{answer["text"]}"')
    return " / ".join(parts) or "(no answer)"


def answer_text(request: Request) -> str:
    """The tool result the model reads: who answered, and each question with its answer."""
    decision = request.decision
    answers = answers_of(request) or []
    who = "A person"
    if decision is not None and decision.decided_by is not None:
        actor = decision.decided_by
        who = f"{actor.name} (Slack user {actor.id})" if actor.name else f"Slack user {actor.id}"
    how = {"thread": "by replying in the thread", "modal": "in a form"}.get(
        decision.via.value if decision else "", "with the buttons")
    lines = [f"{who} answered {how}:"]
    for number, answer in enumerate(answers, 1):
        lines.append(f"{number}. {answer.get('question')} -> {answer_line(answer)}")
    return "\n".join(lines)
