"""The demo agent's scripted model: a stand-in for Claude that needs no API key.

It plays one short task the same way every time, deciding from the conversation so far (never from
hidden state, so a restart or a second run replays it): ask to send an email (a card with the email
and an edit form), then to write a file (a card with the diff), then a clarifying question, then
finish with a summary that quotes what the person decided. Served by ``model.FakeAnthropic``, which
checks each request the way the Messages API does.
"""

from __future__ import annotations

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


def _tools_used(body: dict[str, Any]) -> list[str]:
    return [block.get("name", "") for m in body.get("messages", []) if m.get("role") == "assistant"
            and isinstance(m.get("content"), list) for block in m["content"] if block.get("type") == "tool_use"]


def _last_result(body: dict[str, Any]) -> str:
    for m in reversed(body.get("messages", [])):
        if m.get("role") == "user" and isinstance(m.get("content"), list):
            for block in m["content"]:
                if block.get("type") == "tool_result":
                    content = block.get("content")
                    if isinstance(content, list):
                        return " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
                    return str(content or "")
    return ""


def demo_reply(body: dict[str, Any]) -> Reply:
    """The next reply of the demo script, given the request the runner sent."""
    used = _tools_used(body)
    if "send_email" not in used:
        return message(text("First I will email the customers; a person checks the email before it goes."),
                       tool_use("send_email", EMAIL))
    if "write_file" not in used:
        return message(text("Next, the release notes get a 2.4 section."),
                       tool_use("write_file", {"path": NOTES_PATH, "content": NOTES_AFTER}))
    if "ask_human" not in used:
        return message(text("One thing I cannot decide alone."), tool_use("ask_human", {"questions": [QUESTION]}))
    last = _last_result(body).strip() or "no answer"
    return message(text(f"Done. What happened to the last step: {last[:300]}"))
