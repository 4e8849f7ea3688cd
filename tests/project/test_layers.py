"""The edges never hold the store: Slack's listeners and deliveries, the agent API and the runner's
Slack side read through `Reads` (bot/approvals/reads.py) and write through the use cases, which alone reach
storage. Read from the source with `ast`, so a test that is never run still counts."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EDGES = [*sorted((ROOT / "bot" / "slack").glob("*.py")), *sorted((ROOT / "bot" / "api").glob("*.py")),
         ROOT / "bot" / "agent" / "slack.py"]


def store_uses(source: str, name: str) -> list[str]:
    """`x.store` attributes and `Store` (the storage interface's class) named in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "store":
            found.append(f"{name}:{node.lineno}: .store")
        elif isinstance(node, ast.ImportFrom) and node.module == "storage.base" and \
                any(alias.name == "Store" for alias in node.names):
            found.append(f"{name}:{node.lineno}: imports Store")
    return found


def test_no_edge_module_reaches_the_store() -> None:
    assert [use for path in EDGES for use in store_uses(path.read_text(), str(path.relative_to(ROOT)))] == []


def test_the_check_finds_a_store_reached_from_an_edge() -> None:
    made_up = ("from storage.base import Store\n\nasync def f(service):\n"
               "    return await service.store.get_request('x')\n")
    assert store_uses(made_up, "edge.py") == ["edge.py:1: imports Store", "edge.py:4: .store"]


def test_the_decided_webhook_is_built_in_one_place() -> None:
    """Its dedupe key makes it idempotent across the paths that decide (a person, policy at submit,
    the clock): two constructors could drift apart."""
    builders = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "bot").rglob("*.py"))
                if '"approval.decided"' in p.read_text()]
    assert builders == ["bot/outbox/effects.py"]
