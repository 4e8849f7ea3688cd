"""The documentation as the tests read it: the examples they run come from README.md and docs/, never a
copy. One reader for all of them: a page, a `## section` of it, a fenced block, a marked example."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->\n```\w*\n(.*?)\n```", re.S)


def page(path: str) -> str:
    """A page's text, by its path from the repository root (`README.md`, `docs/api.md`)."""
    return (ROOT / path).read_text()


def section(text: str, title: str) -> str:
    """From the heading that starts `## TITLE` (any level) to the next heading of that level, or to the end."""
    found = re.search(rf"^(#+) {re.escape(title)}", text, re.M)
    assert found, f"no section {title!r}"
    end = re.compile(rf"^{found.group(1)} ", re.M).search(text, found.end())
    return text[found.start():end.start() if end else len(text)]


def fenced(text: str, lang: str, *, after: str | None = None) -> str:
    """The first ```LANG block of `text` (after the first line containing `after`), without its fences."""
    start = text.index(after) if after is not None else 0
    block = re.compile(rf"```{lang}\n(.*?)\n?```", re.S).search(text, start)
    assert block is not None, f"no ```{lang} block" + (f" after {after!r}" if after else "")
    return block.group(1)


def doc_examples() -> dict[str, tuple[Path, str]]:
    """Every code block the README and the docs mark with `<!-- example: NAME -->`: name -> (page, code).
    Names are unique."""
    found: dict[str, tuple[Path, str]] = {}
    for path in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for match in EXAMPLE.finditer(path.read_text()):
            assert match.group(1) not in found, f"example {match.group(1)!r} is marked twice"
            found[match.group(1)] = (path, match.group(2))
    return found


def doc_example(name: str) -> str:
    """The code block the README or a docs page marks `<!-- example: NAME -->`."""
    found = doc_examples().get(name)
    assert found, f"the docs have no example {name!r}"
    return found[1]
