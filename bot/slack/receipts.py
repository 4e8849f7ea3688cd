"""The card's footer about what ran after an approval (an execution receipt, bot.domain.outcomes).

"▶️ Ran 14:02 with the approved parameters", or a difference flagged: "⚠️ Ran 14:02 with different
parameters" (and which, approved → ran), "⚠️ ... failed when run: ..." with the error, "⏭️ Not run:
...". What the agent reported (its error, its result, parameter names and values) is agent text:
it goes into plain rich_text elements, never into mrkdwn. Pure functions of domain values.
"""

from __future__ import annotations

from typing import Any

from bot.domain.model import Decision
from bot.domain.outcomes import RanStatus, RunOutcome, changed_fields
from bot.slack.previews import clip, cut, more, note, one_line, rich_text, rt_bullets, rt_quote, rt_section, rt_text, show_value
from bot.slack.text import slack_date

RESULT_BUDGET = 300
DIFF_SHOWN_MAX = 8
DIFF_VALUE_MAX = 120


def ran_line(ran: RunOutcome) -> str:
    """One line of mrkdwn (our own words and a Slack date only) saying what ran and when."""
    at = slack_date(ran.at, "{time}")
    if ran.status is RanStatus.SKIPPED:
        return f"⏭️ *Not run* (reported {at})"
    if ran.same_params is False:
        return f"⚠️ *Ran {at} with different parameters* than were approved"
    if ran.same_params:
        return f"▶️ Ran {at} with the approved parameters"
    return f"▶️ Ran {at} (the parameters used were not reported)"


def ran_blocks(ran: RunOutcome, decision: Decision) -> list[dict[str, Any]]:
    """The footer of a card whose approved action ran (or was skipped): the line, then the difference,
    the reason it was not run, or the short result."""
    blocks: list[dict[str, Any]] = [{"type": "context", "elements": [{"type": "mrkdwn", "text": ran_line(ran)}]}]
    if ran.status is RanStatus.SKIPPED:
        blocks.append(rich_text(rt_quote(cut(ran.error, 1000) or "(no reason given)")))
    elif ran.same_params is False and ran.params is not None:
        blocks.append(_difference(decision.params, ran.params))
    elif ran.result is not None:
        shown = clip(one_line(show_value(ran.result)), RESULT_BUDGET)
        blocks.append(rich_text(rt_section(rt_text("Result: ", bold=True), rt_text(shown))))
    return blocks


def _difference(approved: dict[str, Any], used: dict[str, Any]) -> dict[str, Any]:
    fields = changed_fields(approved, used)
    lines = [rt_section(rt_text(clip(name, 100), bold=True),
                        rt_text(f": approved {_value(approved, name)} → ran {_value(used, name)}"))
             for name in fields[:DIFF_SHOWN_MAX]]
    elements = [rt_section(rt_text("What ran differs", bold=True)), rt_bullets(lines)]
    if len(fields) > DIFF_SHOWN_MAX:
        elements.append(note(more(len(fields) - DIFF_SHOWN_MAX, "fields")))
    return rich_text(*elements)


def _value(params: dict[str, Any], name: str) -> str:
    if name not in params:
        return "(absent)"
    return clip(one_line(show_value(params[name])), DIFF_VALUE_MAX)
