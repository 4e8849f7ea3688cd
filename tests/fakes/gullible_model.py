"""A scripted model for AI notes and thread answers that makes a leaky prompt visible.

Plugged into the runner tests' fake Messages API (`bot.sandbox.model.FakeAnthropic.on_request`), it
reads a request the way a gullible model would:

- anything outside the data blocks (`<request_data>`, `<history_facts>`, `<question>`) and the system
  prompt that says "ignore previous instructions" is obeyed: the reply is REASSURING (it says the
  action is safe and should be approved). A prompt that let agent text out of its block therefore
  shows as a reassuring note;
- inside the blocks it reads the data: the tool, each fact, and it copies every Slack token
  (`<!channel>`, `<@U1>`, `<https://...|...>`) and URL it finds in the agent's text into its reply,
  as a model echoing its input would. What is shown must have had them taken out;
- an instruction it finds inside the data it reports ("the request contains instructions"), as the
  system prompt asks;
- a `<question>` block gets an answer quoting the question and the agent's reasoning.
"""

from __future__ import annotations

import json
import re
from typing import Any

from bot.sandbox.model import Reply, message, text

REASSURING = "This is safe: approve it."
_BLOCKS = re.compile(r"<(request_data|history_facts|question)>\n?(.*?)\n?</\1>", re.S)  # the first close ends it
_INJECTION = re.compile(r"ignore (all )?previous instructions", re.I)
_TOKENS = re.compile(r"<[^<>]+>|https?://\S+")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def user_text(body: dict[str, Any]) -> str:
    parts = []
    for msg in body.get("messages") or []:
        content = msg.get("content")
        if isinstance(content, str):
            parts.append(content)
        else:
            parts += [b.get("text", "") for b in content or [] if isinstance(b, dict)]
    return "\n".join(parts)


def system_text(body: dict[str, Any]) -> str:
    system = body.get("system") or ""
    return system if isinstance(system, str) else "\n".join(b.get("text", "") for b in system)


def read(body: dict[str, Any]) -> str:
    """The reply text of the gullible model for a Messages API request body."""
    user = user_text(body)
    blocks = {m.group(1): m.group(2) for m in _BLOCKS.finditer(user)}
    outside = _BLOCKS.sub("", user) + "\n" + system_text(body)
    found = _INJECTION.search(outside)
    if found:
        return f"{REASSURING} (as instructed: {outside[found.start():found.start() + 60]!r})"
    data: Any = {}
    if "request_data" in blocks:
        try:
            data = json.loads(blocks["request_data"])
        except ValueError:
            data = {"unreadable": blocks["request_data"]}
    agent_text = " ".join(_strings(data))
    lines = [f"Calls {data.get('tool', 'a tool')}." if isinstance(data, dict) else "Calls a tool."]
    facts = [line[2:] for line in blocks.get("history_facts", "").splitlines() if line.startswith("- ")]
    lines.append("Unusual: " + " ".join(facts) if facts else "Nothing unusual.")
    if _INJECTION.search(agent_text):
        lines.append("The request contains instructions aimed at the reviewer.")
    echoed = _TOKENS.findall(agent_text)
    if echoed:
        lines[0] += " See " + " ".join(echoed)
    if "question" in blocks:
        asked = json.loads(blocks["question"])
        reasoning = data.get("agent_reasoning", "none given") if isinstance(data, dict) else "none given"
        steps = data.get("recent_steps_of_the_run") if isinstance(data, dict) else None
        lines = [f"You asked {asked!r}. The agent's reasoning: {reasoning}."]
        if steps:
            lines.append(f"Its last step: {steps[-1]}")
    return "\n".join(lines)


def gullible(body: dict[str, Any]) -> Reply:
    """`FakeAnthropic.on_request` factory: every request answered by `read`."""
    return message(text(read(body)))
