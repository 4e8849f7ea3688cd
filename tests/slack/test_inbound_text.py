"""`from_slack`: what a person typed, from Slack's escaped message and slash-command text."""

from __future__ import annotations

import pytest

from bot.slack.text import from_slack


@pytest.mark.parametrize(("sent", "typed"), [
    ("plain words", "plain words"),
    ("Smith &amp; Sons &lt;ltd&gt;", "Smith & Sons <ltd>"),
    ("typed &amp;lt; literally", "typed &lt; literally"),  # unescaped once, in the right order
    ("<@U123|bob> and <@W9>", "@bob and @W9"),
    ("in <#C1|ops> or <#C2>", "in #ops or #C2"),
    ("<!here> <!channel>", "@here @channel"),
    ("<!subteam^S1|@eng> <!subteam^S2>", "@eng @S2"),
    ("<https://x.example/a?b=1&amp;c=2|docs>", "docs (https://x.example/a?b=1&c=2)"),
    ("<https://x.example>", "https://x.example"),
    ("<https://x.example|https://x.example>", "https://x.example"),
    ("<mailto:a@b.example|a@b.example>", "a@b.example"),
    ("<!date^1700000000^{date}|Nov 14>", "Nov 14"),
    ("unbalanced < stays", "unbalanced < stays"),
])
def test_from_slack(sent: str, typed: str) -> None:
    assert from_slack(sent) == typed
