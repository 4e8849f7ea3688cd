"""bot.slack.previews.text_length counts what its recursive definition counts."""

from __future__ import annotations

import pytest

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from bot.slack.previews import text_length

keys = st.sampled_from(["text", "type", "elements", "fields", "alt_text", "x"])
trees = st.recursive(
    st.none() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=30,
)


def reference(node: Any) -> int:
    """The definition: every `text` string's characters, at any depth, nothing else."""
    if isinstance(node, dict):
        own = len(node["text"]) if isinstance(node.get("text"), str) else 0
        return own + sum(reference(v) for k, v in node.items() if k != "text" or not isinstance(v, str))
    if isinstance(node, list):
        return sum(reference(v) for v in node)
    return 0


@pytest.mark.property
@given(trees)
def test_counts_every_text_string(tree: Any) -> None:
    assert text_length(tree) == reference(tree)


def test_a_section_block() -> None:
    block = {"type": "section", "text": {"type": "mrkdwn", "text": "abc"},
             "fields": [{"type": "plain_text", "text": "de"}], "block_id": "text"}
    assert text_length([block, "text", {"text": 5}]) == 5
