"""`visible` names every invisible character; `editable` and `from_editable` round-trip exactly."""

from __future__ import annotations

import pytest

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.slack.text import editable, from_editable, neutralise, visible

CF = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"]
texts = st.text(alphabet=st.one_of(st.sampled_from([*CF, "⟨", "⟩", "U", "+", "×", "<", "@", "a", "0"]),
                                   st.characters()), max_size=40)


def test_every_format_character_python_knows_is_made_visible() -> None:
    for char in CF:
        assert visible(f"a{char}b") == f"a⟨U+{ord(char):04X}⟩b", hex(ord(char))


@settings(max_examples=300, deadline=None, derandomize=True)
@pytest.mark.property
@given(texts)
def test_editable_round_trips_and_shows_nothing_invisible(text: str) -> None:
    shown = editable(text)
    assert from_editable(shown) == text
    assert neutralise(neutralise(text)) == neutralise(text)
    for i, char in enumerate(neutralise(text)):
        if unicodedata.category(char) == "Cf":
            # only a zero-width joiner inside an emoji, or the token breaker after "<"
            assert char in "\u200d\u200b", (text, i)
