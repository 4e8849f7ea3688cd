"""Block Kit for agent runs, as pure functions: the run's root message, question cards, thread notes.

Agent and task text is untrusted: it goes into plain_text and rich_text (neutralised), and is
escaped where it has to sit inside our own mrkdwn.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.domain.questions import answer_line, answers_of, questions_of
from bot.domain.model import Request, Status
from bot.domain.runs import ExecStatus, Run, RunStatus, ToolExecution
from bot.slack.blocks import OUTCOME_LABEL
from bot.slack.text import is_user, slack_date
from bot.slack.previews import clip, cut, escape_mrkdwn, one_line, plain, rich_text, rt_section, rt_text

CANCEL_RUN = "signoff_run_cancel"
RETRY_RUN = "signoff_run_retry"  # a failed run: go on from where it stopped
CORRECT_RUN = "signoff_run_correct"  # a failed run: a person's message to the model, then go on
CORRECT_VIEW = "signoff_run_correct_view"
CORRECT_BLOCK, CORRECT_INPUT = "correction", "text"
CLOSE_RUN = "signoff_run_close"  # a failed run: give it up (cancelled)
TAKE_OVER_BLOCK = "run_takeover:"  # + the run's `retries` when the buttons were shown


def taken_over_at(block_id: object) -> int | None:
    """The `retries` a take-over button was shown for (from its block id), or None."""
    if isinstance(block_id, str) and block_id.startswith(TAKE_OVER_BLOCK):
        number = block_id[len(TAKE_OVER_BLOCK):]
        return int(number) if number.isdigit() and len(number) < 9 else None
    return None
ANSWER_PREFIX = "signoff_answer_"  # + "{question}_{option}": one click answers a one-question card
ANSWER_SUBMIT = "signoff_answer_submit"
PICK_PREFIX = "signoff_pick_"  # + "{question}": radio buttons / checkboxes, read on submit
QUESTION_BLOCK_PREFIX = "signoff_q"
RUN_EVENT_TYPE = "signoff_run"
NOTE_EVENT_TYPE = "signoff_run_note"

TASK_MAX = 2000
TRACE_CALLS = 15  # the failure note's trace: the run's last calls
TRACE_LINE = 160
CORRECTION_MAX = 3000
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
    if run.status is RunStatus.FAILED and run.root_ts:
        blocks.append(take_over_actions(run))
    return {"text": f"Agent run ({status}): {escape_mrkdwn(clip(one_line(run.task), 200))}", "blocks": blocks}


def mention(user: str) -> str:
    """A Slack user id as a mention; anything else as escaped text."""
    return f"<@{user}>" if is_user(user) else escape_mrkdwn(user)


def take_over_actions(run: Run) -> dict[str, Any]:
    """A failed run's buttons: Retry (from where it stopped), Correct and retry (a message first), Cancel."""
    def button(action_id: str, label: str, **more: Any) -> dict[str, Any]:
        return {"type": "button", "action_id": action_id, "value": run.id,
                "text": {"type": "plain_text", "text": label}, **more}

    # The block names the failure it was shown for: a click on it takes over that failure only (a
    # double click, or a click on an old copy after the run failed again, changes nothing).
    return {"type": "actions", "block_id": f"{TAKE_OVER_BLOCK}{run.retries}", "elements": [
        button(RETRY_RUN, "Retry", style="primary"),
        button(CORRECT_RUN, "Correct and retry"),
        button(CLOSE_RUN, "Cancel", confirm={
            "title": {"type": "plain_text", "text": "Give up this run?"},
            "text": {"type": "plain_text", "text": "It stays failed and can no longer be retried."},
            "confirm": {"type": "plain_text", "text": "Give up"},
            "deny": {"type": "plain_text", "text": "Keep it"},
        }),
    ]}


def trace_lines(executions: list[ToolExecution]) -> list[str]:
    """The run's tool calls, oldest first, one line each: step, tool, what became of it (agent text)."""
    steps = {seq: i + 1 for i, seq in enumerate(sorted({e.turn_seq for e in executions}))}
    lines = []
    for e in sorted(executions, key=lambda e: (e.turn_seq, e.position)):
        if e.status is ExecStatus.FINISHED:
            state = "error" if e.is_error else "ran"
            result = e.result[-1].get("text", "") if isinstance(e.result, list) and e.result else e.result
            said = one_line(str(result or ""))
            line = f"{state}: {said}" if said else state
        else:
            line = {ExecStatus.WAITING: "waiting for a decision", ExecStatus.READY: "not run yet",
                    ExecStatus.STARTED: "was running"}[e.status]
        lines.append(clip(f"step {steps[e.turn_seq]} · {e.name} · {line}", TRACE_LINE))
    if len(lines) > TRACE_CALLS:
        lines = [f"({len(lines) - TRACE_CALLS} earlier calls not shown)", *lines[-TRACE_CALLS:]]
    return lines


def failure_note(run: Run, error: str, executions: list[ToolExecution]) -> dict[str, Any]:
    """The thread note of a failed run: the error, the trace, and where to take it over."""
    steps = f"{run.step_count} step{'s' if run.step_count != 1 else ''}"
    text = (f"❌ The run failed after {steps}. Take it over from the run's message: *Retry* goes on from "
            "here, *Correct and retry* first gives the agent your message; finished tool calls never run again.")
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": text}},
                                    rich_text(rt_section(rt_text("Error: ", bold=True), rt_text(cut(error, ERROR_MAX))))]
    lines = trace_lines(executions)
    if lines:
        blocks.append(rich_text(rt_section(rt_text("What it did:\n", bold=True),
                                           rt_text(cut("\n".join(lines), RESULT_MAX)))))
    return {"text": f"❌ The run failed after {steps}.", "blocks": blocks}


def correct_modal(run: Run) -> dict[str, Any]:
    """Correct and retry: the person's message reaches the model before it goes on."""
    return {
        "type": "modal", "callback_id": CORRECT_VIEW, "private_metadata": f"{run.id}:{run.retries}",
        "title": {"type": "plain_text", "text": "Correct and retry"},
        "submit": {"type": "plain_text", "text": "Retry"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {"type": "section", "text": plain(f"Task: {clip(one_line(run.task), 200)}", limit=300)},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": (
                "The agent reads your message first and goes on from where it stopped; the steps it "
                "finished are kept and their tool calls never run again.")}]},
            {"type": "input", "block_id": CORRECT_BLOCK, "label": {"type": "plain_text", "text": "Your message to the agent"},
             "element": {"type": "plain_text_input", "action_id": CORRECT_INPUT, "multiline": True,
                         "max_length": CORRECTION_MAX}},
        ],
    }


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
