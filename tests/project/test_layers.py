"""The edges never hold the store: Slack's listeners and deliveries, the agent API, the outbox, the in-process
caches and the runner's Slack side read through `Reads` (bot/approvals/reads.py) and write through the use
cases, which alone reach storage. Every outbox item is made by its one constructor (bot/outbox/effects.py).
Read from the source with `ast`, so a test that is never run still counts."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Every module of bot/ but the use cases (bot/approvals; the agent runner's on runs, bot/agent) and the
# process that opens the store (bot/process); of bot/agent, its Slack side is an edge.
EDGES = [*(p for p in sorted((ROOT / "bot").rglob("*.py"))
           if p.relative_to(ROOT / "bot").parts[0] not in ("approvals", "process", "agent")),
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


# Every `ast.parse` of this module runs at collection: CPython 3.11.7's can fail with "AST constructor
# recursion depth mismatch" after a test that recursed deeply (gh-106905, as in test_imports.py).
EDGE_STORE_USES = [use for path in EDGES for use in store_uses(path.read_text(), str(path.relative_to(ROOT)))]
MADE_UP_STORE_USES = store_uses("from storage.base import Store\n\nasync def f(service):\n"
                                "    return await service.store.get_request('x')\n", "edge.py")


def test_no_edge_module_reaches_the_store() -> None:
    assert EDGE_STORE_USES == []


def test_the_check_finds_a_store_reached_from_an_edge() -> None:
    assert MADE_UP_STORE_USES == ["edge.py:1: imports Store", "edge.py:4: .store"]


def test_the_decided_webhook_is_built_in_one_place() -> None:
    """Its dedupe key makes it idempotent across the paths that decide (a person, policy at submit,
    the clock): two constructors could drift apart."""
    builders = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "bot").rglob("*.py"))
                if '"approval.decided"' in p.read_text() or "webhook:{request.id}:decided" in p.read_text()]
    assert builders == ["bot/outbox/effects.py"]


def item_builders(source: str, name: str) -> list[str]:
    """Calls that make an `OutboxItem` directly (`OutboxItem(...)`, `OutboxItem.due(...)`) in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == "OutboxItem") or (
                    isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "OutboxItem"):
                found.append(f"{name}:{node.lineno}")
    return found


ITEMS_MADE = [call for p in sorted([*(ROOT / "bot").rglob("*.py"), *(ROOT / "storage").rglob("*.py")])
              for call in item_builders(p.read_text(), str(p.relative_to(ROOT)))]  # at collection (above)
ITEMS_MADE_UP = item_builders(
    "from bot.domain.outbox import OutboxItem\n\nitem = OutboxItem.due('x', 'k', now, ordered_by=None)\n", "edge.py")


def test_every_outbox_item_is_made_by_its_one_constructor() -> None:
    """Only bot/outbox/effects.py makes items (one constructor per kind, with its dedupe key's shape and its
    payload); storage only reads stored ones back (storage/rows.py)."""
    made = ITEMS_MADE
    assert [c.split(":")[0] for c in made if not c.startswith(("bot/outbox/effects.py:", "storage/rows.py:"))] == []
    assert any(c.startswith("bot/outbox/effects.py:") for c in made)


def test_the_check_finds_an_item_made_by_hand() -> None:
    assert ITEMS_MADE_UP == ["edge.py:3"]
