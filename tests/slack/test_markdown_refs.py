"""Markdown previews: a link reference definition hidden in a list item or a quote is neutralised too
(issue 9, defect 12), so "[label][x]" can never become a link that hides its target."""

from __future__ import annotations

import re

import pytest

from bot.slack.previews import safe_markdown

LIVE_DEFINITION = re.compile(r"\[[^\]]+\]:")


@pytest.mark.parametrize("text", [
    "- [x]: https://evil.example/login\n\nPlease [sign in][x]",
    "* item\n\n  [x]: https://evil.example",
    "1. first\n   [x]: https://evil.example\n\n[ok][x]",
    "> [x]: https://evil.example\n\n[ok][x]",
    "- > - [x]: https://evil.example",
    "   [x]: https://evil.example",
])
def test_reference_definitions_anywhere_are_neutralised(text: str) -> None:
    shown = safe_markdown(text)
    assert not LIVE_DEFINITION.search(shown), shown
    assert "evil.example" in shown  # the target is still shown, as text
