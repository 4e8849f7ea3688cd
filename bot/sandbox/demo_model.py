"""The demo agent's scripted model: a stand-in for Claude that needs no API key.

It plays one short task the same way every time, deciding from the conversation so far (never from
hidden state, so a restart or a second run replays it): ask to send an email (a card with the email
and an edit form), then to write a file (a card with the diff), then a clarifying question, then
finish with a summary, one line a step, of what became of each (sent, written, rejected, chosen). Given
any other task it says first that it plays this one script (``ONE_SCRIPT``). Served by ``model.FakeAnthropic``, which
checks each request the way the Messages API does.
"""

from __future__ import annotations

import re
from typing import Any

from bot.sandbox.model import Reply, message, text, tool_use

TASK = "Announce release 2.4 to the customers and update the release notes."
NOTES_PATH = "RELEASE_NOTES.md"
NOTES_BEFORE = "# Release notes\n\n## 2.3\n- Faster exports\n"
NOTES_AFTER = NOTES_BEFORE.replace("# Release notes\n\n", "# Release notes\n\n## 2.4\n- Approvals in Slack\n- Edit before approving\n\n")
EMAIL = {
    "to": "customers@example.com",
    "subject": "Release 2.4 is out",
    "body": "Hello,\n\nrelease 2.4 is out today: approvals in Slack, and edits before approving.\n\nThe team",
}
QUESTION = {
    "question": "Where should I post the announcement next?",
    "options": [{"label": "#general", "description": "everyone"}, {"label": "#releases", "description": "the usual"}],
}


_SLACK_ID = re.compile(r" \(Slack user [A-Z0-9]+\)")
_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
ONE_SCRIPT = ("This sandbox's demo agent plays one script whatever the task: announce release 2.4 and update "
              "the release notes; it only takes an email address from your task (set ANTHROPIC_API_KEY before "
              "`signoff demo` to have Claude work on your task).")


def _email(task: str) -> dict[str, str]:
    """The script's email, sent to the first address the task names (the task followed where it can)."""
    found = _ADDRESS.search(task)
    return {**EMAIL, "to": found.group(0).rstrip(".")} if found else EMAIL


def _tools_used(body: dict[str, Any]) -> list[str]:
    return [block.get("name", "") for m in body.get("messages", []) if m.get("role") == "assistant"
            and isinstance(m.get("content"), list) for block in m["content"] if block.get("type") == "tool_use"]


def _task(body: dict[str, Any]) -> str:
    for m in body.get("messages", []):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _results(body: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """Each tool_use id's result: (its text, whether it is an error)."""
    out: dict[str, tuple[str, bool]] = {}
    for m in body.get("messages", []):
        if m.get("role") == "user" and isinstance(m.get("content"), list):
            for block in m["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    content = block.get("content")
                    if isinstance(content, list):
                        content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
                    out[str(block.get("tool_use_id"))] = (str(content or "").strip(), bool(block.get("is_error")))
    return out


def _first_line(text: str, limit: int = 200) -> str:
    line = _SLACK_ID.sub("", (text.splitlines() or [""])[0]).strip()  # "alice", not "alice (Slack user UALICE)"
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _outcome(name: str, params: dict[str, Any], result: str, failed: bool) -> str:
    """One line a person reads in the run's last message: what became of one step."""
    if name == "send_email":
        if failed:
            return f"• The email to {params.get('to', 'the customers')} was not sent: {_first_line(result)}"
        subject = result.rsplit("subject: ", 1)[1].strip() if "subject: " in result else params.get("subject", "")
        return f"• Emailed {params.get('to', 'the customers')}: “{_first_line(str(subject))}”"
    if name == "write_file":
        path = params.get("path", NOTES_PATH)
        return f"• {path} was not changed: {_first_line(result)}" if failed else f"• Updated {path} with a 2.4 section"
    if name == "ask_human":
        if failed:
            return f"• My question got no answer: {_first_line(result)}"
        who = result.split(" (", 1)[0] if " answered " in result else "You"
        chosen = [line.rsplit(" -> ", 1)[1].strip() for line in result.splitlines() if " -> " in line]
        return f"• {who} chose {', '.join(chosen) or 'nothing'} for the announcement"
    return f"• {name}: {'failed: ' if failed else ''}{_first_line(result)}"


def summary(body: dict[str, Any]) -> str:
    """The last message: what became of each step, in words (not the tool results as the model read them)."""
    results = _results(body)
    lines = ["Done. Here is what happened:"]
    for m in body.get("messages", []):
        if m.get("role") == "assistant" and isinstance(m.get("content"), list):
            for block in m["content"]:
                if block.get("type") == "tool_use" and str(block.get("id")) in results:
                    result, failed = results[str(block.get("id"))]
                    lines.append(_outcome(str(block.get("name")), dict(block.get("input") or {}), result, failed))
    return "\n".join(lines)


def demo_reply(body: dict[str, Any]) -> Reply:
    """The next reply of the demo script, given the request the runner sent."""
    used = _tools_used(body)
    if "send_email" not in used:
        first = "First I will email the customers; a person checks the email before it goes."
        if _task(body).strip() != TASK:
            first = f"{ONE_SCRIPT}\n\n{first}"
        return message(text(first), tool_use("send_email", _email(_task(body))))
    if "write_file" not in used:
        return message(text("Next, the release notes get a 2.4 section."),
                       tool_use("write_file", {"path": NOTES_PATH, "content": NOTES_AFTER}))
    if "ask_human" not in used:
        return message(text("One thing I cannot decide alone."), tool_use("ask_human", {"questions": [QUESTION]}))
    return message(text(summary(body)))
