"""Block Kit for agent runs, as pure functions: the run's root message, question cards, thread notes.

Agent and task text is untrusted: it goes into plain_text and rich_text (neutralised), and is
escaped where it has to sit inside our own mrkdwn.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.domain.questions import answer_line, answers_of, questions_of
from bot.domain.model import Request, Status
from bot.domain.runs import Run, RunStatus
from bot.slack.blocks import OUTCOME_LABEL
from bot.slack.text import is_user, slack_date
from bot.slack.previews import clip, cut, escape_mrkdwn, one_line, plain, rich_text, rt_section, rt_text

CANCEL_RUN = "signoff_run_cancel"
ANSWER_PREFIX = "signoff_answer_"  # + "{question}_{option}": one click answers a one-question card
ANSWER_SUBMIT = "signoff_answer_submit"
PICK_PREFIX = "signoff_pick_"  # + "{question}": radio buttons / checkboxes, read on submit
QUESTION_BLOCK_PREFIX = "signoff_q"
RUN_EVENT_TYPE = "signoff_run"
NOTE_EVENT_TYPE = "signoff_run_note"

TASK_MAX = 2000
RESULT_MAX = 3500
ERROR_MAX = 1500
QUESTION_TEXT_MAX = 2000
# Text budgets shared by all the questions of a card (Slack refuses messages past ~13k characters of
# text in all, see bot/slack/blocks.py): four questions get 1,000 characters each, one gets 2,000.
QUESTIONS_BUDGET = 4000
ANSWERS_BUDGET = 3000

RUN_STATUS_LABEL = {
    RunStatus.RUNNING: "⏳ Running",
    RunStatus.WAITING: "✋ Waiting for a person",
    RunStatus.COMPLETED: "✅ Completed",
    RunStatus.FAILED: "❌ Failed",
    RunStatus.CANCELLED: "🚫 Cancelled",
}


def root_message(run: Run) -> dict[str, Any]:
    """The run's top-level message: task, status, step count and (while it runs) Cancel."""
    status = RUN_STATUS_LABEL[run.status]
    if run.status is RunStatus.COMPLETED and run.failed_steps:
        status = f"⚠️ {finished_with_failures(run.failed_steps)}"
    if run.cancel_requested and not run.status.is_final:
        status = "🚫 Cancelling…"
    steps = f"{run.step_count} step{'s' if run.step_count != 1 else ''}"
    context: list[dict[str, Any]] = [
        {"type": "mrkdwn", "text": f"*{status}*"},
        {"type": "mrkdwn", "text": steps},
        plain(f"agent: {run.agent}", limit=200),
    ]
    if run.requested_by:
        who = run.requested_by
        context.append({"type": "mrkdwn", "text": f"started by <@{who}>"} if is_user(who)
                       else plain(f"started by {who}", limit=200))
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": plain("🤖 Agent run", limit=150)},
        rich_text(rt_section(rt_text(cut(run.task, TASK_MAX)))),
        {"type": "context", "elements": context},
    ]
    if run.status is RunStatus.FAILED and run.error:
        blocks.append(rich_text(rt_section(rt_text("Error: ", bold=True), rt_text(cut(run.error, ERROR_MAX)))))
    if run.status is RunStatus.CANCELLED and run.cancelled_by:
        by = f"<@{run.cancelled_by}>" if is_user(run.cancelled_by) else escape_mrkdwn(run.cancelled_by)
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"Cancelled by {by}"}]})
    if not run.status.is_final and not run.cancel_requested:
        blocks.append({"type": "actions", "block_id": "run", "elements": [{
            "type": "button", "action_id": CANCEL_RUN, "value": run.id, "style": "danger",
            "text": {"type": "plain_text", "text": "Cancel run"},
            "confirm": {
                "title": {"type": "plain_text", "text": "Cancel this run?"},
                "text": {"type": "plain_text", "text": "The agent stops at its next step; open cards close."},
                "confirm": {"type": "plain_text", "text": "Cancel run"},
                "deny": {"type": "plain_text", "text": "Keep going"},
            },
        }]})
    return {"text": f"Agent run ({status}): {escape_mrkdwn(clip(one_line(run.task), 200))}", "blocks": blocks}


def note_message(emoji: str, text: str, *, detail: str | None = None) -> dict[str, Any]:
    """A thread note. `text` is our own mrkdwn (callers escape what they quote); `detail` is agent text."""
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": clip(f"{emoji} {text}", 3000)}}]
    if detail:
        blocks.append(rich_text(rt_section(rt_text(cut(detail, RESULT_MAX)))))
    return {"text": clip(f"{emoji} {text}", 3000), "blocks": blocks}


def final_message(run: Run, text: str) -> dict[str, Any]:
    """The model's last words, posted in the thread when the run completes."""
    steps = f"{run.step_count} step{'s' if run.step_count != 1 else ''}"
    heading = f"✅ Done after {steps}."
    if run.failed_steps:  # an approved action failed when it ran: not a success, whatever the model says
        heading = f"⚠️ {finished_with_failures(run.failed_steps)} (after {steps}); see the cards above."
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": heading}}]
    if text.strip():
        blocks.append(rich_text(rt_section(rt_text(cut(text.strip(), RESULT_MAX)))))
    return {"text": heading, "blocks": blocks}


def finished_with_failures(count: int) -> str:
    return f"Finished with {count} failed step{'s' if count != 1 else ''}"


# --------------------------------------------------------------------------- question cards


def is_one_click(request: Request) -> bool:
    """One single-choice question: an option button answers it directly."""
    questions = questions_of(request)
    return len(questions) == 1 and not questions[0].get("multi_select")


def question_card(request: Request, *, now: datetime) -> dict[str, Any]:
    questions = questions_of(request)
    title = one_line(request.summary) or "The agent has a question"
    blocks: list[dict[str, Any]] = [{"type": "header", "text": plain(f"❓ {title}", limit=150)}]
    if request.is_pending:
        for i, question in enumerate(questions):
            blocks += _pending_question(request, i, question, len(questions))
        if not is_one_click(request):
            blocks.append({"type": "actions", "block_id": "signoff_answer", "elements": [{
                "type": "button", "action_id": ANSWER_SUBMIT, "value": request.id, "style": "primary",
                "text": {"type": "plain_text", "text": "Submit answers" if len(questions) > 1 else "Submit answer"},
            }]})
        blocks.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": "Or reply in this thread in your own words."}]})
        return {"text": f"Question: {escape_mrkdwn(clip(title, 300))}", "blocks": blocks[:50]}
    answers = answers_of(request) or []
    for i, question in enumerate(questions):
        answer = answers[i] if i < len(answers) else None
        elements = [rt_section(rt_text(_question_line(i, question, len(questions)), bold=True))]
        if answer is not None:
            budget = min(1500, ANSWERS_BUDGET // max(1, len(questions)))
            elements.append(rt_section(rt_text("→ " + cut(answer_line(answer), budget))))
        blocks.append(rich_text(*elements))
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _outcome_line(request)}]})
    label = OUTCOME_LABEL[request.decision.outcome][1] if request.decision else request.status.value.title()
    return {"text": f"{label}: {escape_mrkdwn(clip(title, 300))}", "blocks": blocks[:50]}


def _question_line(i: int, question: dict[str, Any], count: int) -> str:
    header = one_line(str(question.get("header") or ""))
    prefix = f"{i + 1}. " if count > 1 else ""
    text = one_line(str(question.get("question", "")))
    budget = min(QUESTION_TEXT_MAX, QUESTIONS_BUDGET // max(1, count))
    return clip(f"{prefix}{header + ': ' if header else ''}{text}", budget)


def _pending_question(request: Request, i: int, question: dict[str, Any], count: int) -> list[dict[str, Any]]:
    options = question.get("options") or []
    blocks: list[dict[str, Any]] = [{"type": "section", "text": plain(_question_line(i, question, count), limit=3000)}]
    if is_one_click(request):
        described = [o for o in options if o.get("description")]
        if described:
            blocks.append(rich_text(*[
                rt_section(rt_text(clip(str(o["label"]), 75), bold=True), rt_text(" — " + clip(str(o["description"]), 150)))
                for o in described
            ]))
        blocks.append({"type": "actions", "block_id": f"{QUESTION_BLOCK_PREFIX}{i}", "elements": [
            {"type": "button", "action_id": f"{ANSWER_PREFIX}{i}_{j}", "value": request.id,
             "text": plain(str(o.get("label", "")), limit=75)}
            for j, o in enumerate(options)
        ]})
        return blocks
    choices = [_option(j, o) for j, o in enumerate(options)]
    element = {"type": "checkboxes" if question.get("multi_select") else "radio_buttons",
               "action_id": f"{PICK_PREFIX}{i}", "options": choices}
    blocks.append({"type": "actions", "block_id": f"{QUESTION_BLOCK_PREFIX}{i}", "elements": [element]})
    return blocks


def _option(j: int, option: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"text": plain(str(option.get("label", "")), limit=75), "value": str(j)}
    if option.get("description"):
        out["description"] = plain(str(option["description"]), limit=75)
    return out


def _outcome_line(request: Request) -> str:
    decision = request.decision
    if decision is None:
        return {Status.EXPIRED: "⌛ Expired without an answer", Status.CANCELLED: "🚫 Cancelled"}.get(
            request.status, request.status.value)
    emoji, label = OUTCOME_LABEL[decision.outcome]
    line = f"{emoji} *{label}*"
    actor = decision.decided_by
    if actor is not None:
        line += f" by <@{actor.id}>" if is_user(actor.id) else f" by {escape_mrkdwn(clip(actor.name or actor.id, 80))}"
    line += " " + slack_date(decision.decided_at, "{date_short_pretty} at {time}")
    if decision.via.value == "thread":
        line += " · in the thread"
    return line


__all__ = [
    "ANSWER_PREFIX", "ANSWER_SUBMIT", "CANCEL_RUN", "PICK_PREFIX", "QUESTION_BLOCK_PREFIX", "RUN_EVENT_TYPE",
    "NOTE_EVENT_TYPE", "root_message", "note_message", "final_message", "question_card", "is_one_click", "is_user",
]
