"""Block Kit for runs and questions, as data: valid for slack_sdk, inside Slack's limits, agent text inert."""

from __future__ import annotations

import json
import warnings
from datetime import UTC, datetime
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from bot.agent.blocks import final_message, note_message, question_card, root_message
from bot.slack.blocks import TOTAL_TEXT_BUDGET
from bot.slack.previews import text_length
from bot.agent.questions import question_spec
from bot.domain.questions import answers_from_choices, answers_from_text
from bot.domain.model import Actor, Decision, Outcome, Request, Status, Via
from bot.domain.runs import Run, RunStatus
from bot.approvals.service import Service

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
EVIL = "<!channel> <@U999> <https://evil.example|Approve here> " + "x" * 5000


def valid(message: dict[str, Any]) -> str:
    assert isinstance(message["text"], str) and message["text"]
    assert len(message["blocks"]) <= 50 and text_length(message["blocks"]) <= TOTAL_TEXT_BUDGET
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for block in message["blocks"]:
            parsed = Block.parse(block)
            assert parsed is not None, block
            parsed.to_dict()  # validates recursively
    return json.dumps(message)


def run(**changes: Any) -> Run:
    return Run(id="run_01jf0000000000000000000000", status=RunStatus.RUNNING, task="Tidy the workspace",
               channel="C1", agent="demo", created_at=NOW, updated_at=NOW, requested_by="U1").evolve(**changes)


@pytest.mark.parametrize("status", list(RunStatus))
def test_root_message_in_every_state(status: RunStatus) -> None:
    shown = valid(root_message(run(status=status, step_count=3, error="boom", cancelled_by="U2")))
    assert "3 steps" in shown and "Tidy the workspace" in shown
    has_cancel = "signoff_run_cancel" in shown
    assert has_cancel == (not status.is_final)


def test_root_message_keeps_task_text_inert_and_short() -> None:
    message = root_message(run(task=EVIL, cancel_requested=True))
    shown = valid(message)
    assert "<!channel>" not in shown and "<@U999>" not in shown and "<https://evil" not in shown
    assert "Cancelling" in shown and "signoff_run_cancel" not in shown
    assert "&lt;!channel&gt;" in message["text"]  # the notification text is mrkdwn: escaped


def questions_request(questions: list[dict[str, Any]]) -> Request:
    return Service(store=None).new_request(question_spec(questions, channel="C1", thread_ts="1.000100"))  # type: ignore[arg-type]


ONE = [{"question": "Which environment?", "options": [{"label": "staging", "description": "safe"},
                                                      {"label": "production"}]}]
MANY = [{"question": f"Q{i} {EVIL}"[:2000], "header": "H" * 50, "multi_select": i % 2 == 0,
         "options": [{"label": "L" * 75, "description": "D" * 150} for _ in range(4)]} for i in range(4)]


def test_one_click_question_has_a_button_per_option() -> None:
    request = questions_request(ONE)
    shown = valid(question_card(request, now=NOW))
    assert "signoff_answer_0_0" in shown and "signoff_answer_0_1" in shown and "signoff_answer_submit" not in shown
    assert "reply in this thread" in shown


def test_largest_question_card_fits_and_answers_render() -> None:
    request = questions_request(MANY)
    shown = valid(question_card(request, now=NOW))
    assert "<!channel>" not in shown and "radio_buttons" in shown and "checkboxes" in shown
    assert "signoff_answer_submit" in shown
    for answers, via in ((answers_from_choices(request, {0: [0], 1: [1, 2], 2: [3], 3: [0]}), Via.BUTTON),
                         (answers_from_text(request, EVIL * 3), Via.THREAD)):
        decision = Decision(Outcome.ANSWERED, {"answers": answers}, (), None, Actor("U1", "alice"), NOW, via)
        answered = request.evolve(status=Status.ANSWERED, decision=decision)
        done = valid(question_card(answered, now=NOW))
        assert "<@U1>" in done and "signoff_answer" not in done and "<!channel>" not in done
    expired = valid(question_card(request.evolve(status=Status.EXPIRED), now=NOW))
    assert "Expired" in expired


def test_notes_and_final_message() -> None:
    valid(note_message("⚠️", "plain note", detail=EVIL))
    shown = valid(final_message(run(step_count=1), EVIL))
    assert "Done after 1 step." in shown and "<!channel>" not in shown
