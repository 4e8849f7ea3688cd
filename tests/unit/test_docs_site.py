"""The docs site builds with `mkdocs build --strict` (a broken link between pages fails it), and every
page the README links to exists."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").is_file()


def test_every_docs_page_the_readme_links_to_exists() -> None:
    links = re.findall(r"\]\((docs/[^)#\s]+)", (ROOT / "README.md").read_text())
    assert links, "the README links to no docs page"
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert missing == []


def test_every_page_is_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    assert [page for page in pages if page not in nav] == []


def test_the_sites_home_page_is_the_readme() -> None:
    """docs/index.md is the README with its links made relative to docs/ (refresh it by that rule)."""
    readme = (ROOT / "README.md").read_text()
    assert (ROOT / "docs" / "index.md").read_text() == readme.replace("](docs/", "](")


def test_the_readme_is_a_front_page() -> None:
    """Read in five minutes: the rest lives in docs/."""
    assert len((ROOT / "README.md").read_text().encode()) < 15_000


def test_the_readmes_example_is_the_one_the_docs_examples_test_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    shown = re.search(r"<!-- same as: ([\w-]+) -->\n```python\n(.*?)\n```", readme, re.S)
    assert shown, "the README's example says which docs example it is"
    page = next(p.read_text() for p in (ROOT / "docs").rglob("*.md") if f"<!-- example: {shown.group(1)} -->" in p.read_text())
    run = re.search(rf"<!-- example: {shown.group(1)} -->\n```python\n(.*?)\n```", page, re.S)
    assert run is not None and run.group(1) == shown.group(2)
