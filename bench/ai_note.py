"""Tokens per AI note and per thread answer (docs/ai-notes.md), as the fake Messages API counts them.

    python -m bench.ai_note

Each case builds the prompt Signoff sends (bot/domain/assist.py) for a realistic request, with the
facts of a generated history of 200 approved requests of the tool (bot/domain/unusual.py), and sends
it with the real `anthropic` client (bot/assist/claude.py) to the scripted local fake of the Messages
API (bot/sandbox/model.py) on loopback. The fake answers with a note (or an answer) of the length
the prompt asks for and counts tokens as about four characters each (`usage`): the input figure
follows the prompt's size, which is what Signoff controls; a real model's tokenizer gives other
numbers for the same text. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime
from typing import Any

from bot.assist.claude import Claude
from bot.domain.assist import Prompt, answer_prompt, note_prompt, run_steps
from bot.domain.model import Action, Kind, Preview, Request, Risk, Status
from bot.domain.unusual import unusual
from bot.sandbox.model import FakeAnthropic, message, text

NOTE = ("Sends a refund confirmation e-mail to a customer at evil.example, saying $4,500 will be credited.\n"
        "Unusual: this domain was never approved before (approved mail went to example.com and two others), "
        "and the amount is 45 times the median of 200 approved refunds ($100).")
ANSWER = ("The agent says the customer asked twice and policy allows refunds under $100, but this one is $4,500.\n"
          "Its last steps: it read the ticket, looked up the order, then drafted this e-mail.\n"
          "Nothing in the request explains the new domain.")
BODY = ("Hello Jordan,\n\nThank you for your patience while we looked into order #A-20931. We have approved a "
        "refund of $4,500.00 to the card ending 4421; it should appear within 5-7 business days.\n\n"
        "If anything looks wrong, reply to this e-mail and we will sort it out.\n\nBest,\nSupport team\n")


def history(n: int = 200) -> list[dict[str, Any]]:
    domains = ("example.com", "example.org", "shop.example.net")
    return [{"to": f"customer{i}@{domains[i % 3]}", "subject": f"Your refund for order #A-{10000 + i}",
             "amount": 60 + (i * 7) % 90, "body": "Hello,\nyour refund is on its way."} for i in range(n)]


def card(body: str = BODY) -> Request:
    now = datetime.now(UTC)
    params = {"to": "jordan@evil.example", "subject": "Your refund for order #A-20931", "amount": 4500, "body": body}
    return Request("apr_bench", Kind.APPROVAL, Status.PENDING, Action("send_email", params),
                   "Send the refund e-mail for order #A-20931 to jordan@evil.example", Risk.HIGH, "C1", now, now,
                   context="The customer asked twice; policy allows refunds under $100. The order shows a "
                           "damaged item; the customer asked for a full refund and a confirmation by e-mail.",
                   preview=Preview("email", {"to": [params["to"]], "subject": params["subject"], "body": body}),
                   requested_by="support-agent")


STEPS = run_steps([
    {"role": "user", "content": "Handle ticket #8812: the customer wants a refund for order #A-20931."},
    {"role": "assistant", "content": [{"type": "text", "text": "I'll read the ticket first."},
                                      {"type": "tool_use", "id": "t1", "name": "read_ticket", "input": {"id": 8812}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                  "content": "Customer Jordan: item arrived broken, asked twice for a refund."}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "lookup_order",
                                       "input": {"order": "A-20931"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2",
                                  "content": "Order A-20931: $4,500.00, card ending 4421, delivered 2026-11-28."}]},
    {"role": "assistant", "content": [{"type": "text", "text": "Refund approved by policy; e-mailing the customer."},
                                      {"type": "tool_use", "id": "t3", "name": "send_email", "input": {"to": "..."}}]},
])


async def run() -> list[tuple[str, int, int, int]]:
    rows = []
    async with FakeAnthropic() as fake:
        fake.on_request(lambda body: message(text(ANSWER if "<question>" in str(body["messages"]) else NOTE)))
        claude = Claude(api_key="bench", base_url=fake.url, model="claude-bench", timeout=10)
        past = history()
        cases: list[tuple[str, Prompt]] = []
        for name, req in (("note, e-mail card", card()), ("note, 5 KB e-mail body", card(BODY * 12))):
            cases.append((name, note_prompt(req, unusual("send_email", req.action.params, past, days=30))))
        req = card()
        cases.append(("answer, run's 6 steps", answer_prompt(req, "why is the amount so high?",
                                                              unusual("send_email", req.action.params, past, days=30),
                                                              STEPS)))
        try:
            for name, prompt in cases:
                done = await claude.complete(prompt)
                rows.append((name, len(prompt.system) + len(prompt.user), done.input_tokens, done.output_tokens))
        finally:
            await claude.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    print(f"  {'case':<24} {'prompt chars':>12} {'input tokens':>12} {'output tokens':>13}")
    for name, chars, tokens_in, tokens_out in asyncio.run(run()):
        print(f"  {name:<24} {chars:>12} {tokens_in:>12} {tokens_out:>13}")


if __name__ == "__main__":
    main()
