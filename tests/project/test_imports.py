"""The architecture, checked: imports point inward and nothing imports in a circle.

- `bot.domain` is pure: it imports nothing of the project outside `bot.domain`.
- `storage` imports only `bot.domain` (and itself) from the project.
- Only the use cases reach storage: in `bot/`, only `bot.approvals` (and the agent runner's own use
  cases on runs, which own the run store) import anything of `storage`, besides `bot.process`, which
  opens the store and migrates it. The Slack edge, the API, the outbox, the in-process caches, the
  policy file and the sandbox import none of it, not even its interface's types.
- `signoff` (the agent side) imports nothing of the server; `bench` never imports `tests`.
- No import cycle among the project's modules, counting imports inside functions and under
  `TYPE_CHECKING` too.

Imports are read from the source with `ast`, so the test sees every import, run or not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("bot", "storage", "signoff", "bench")


FOLDERS = {"signoff": ROOT / "client" / "signoff"}  # the agent side is its own distribution, in client/


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT / "client" if "client" in path.relative_to(ROOT).parts[:1] else ROOT)
                 .with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        folder = FOLDERS.get(package, ROOT / package)
        for path in folder.rglob("*.py") if folder.is_dir() else ():
            if "migrations" in path.parts:
                continue  # Alembic's scripts are loaded by Alembic, not imported
            found[_module_name(path)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Every project module `name` imports (the deepest existing module of each dotted name)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets.add(base)
            targets.update(f"{base}.{alias.name}" for alias in node.names)
    resolved = set()
    for target in targets:
        parts = target.split(".")
        while parts and ".".join(parts) not in MODULES:
            parts.pop()
        if parts and ".".join(parts) != name:
            resolved.add(".".join(parts))
    return resolved


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _violations(source_prefix: str, allowed: tuple[str, ...], checked: tuple[str, ...]) -> list[str]:
    """Imports from modules under `source_prefix` into `checked` packages that are not `allowed`."""
    bad = []
    for module, targets in GRAPH.items():
        if module != source_prefix and not module.startswith(source_prefix + "."):
            continue
        for target in targets:
            if target.split(".")[0] in checked and not any(
                target == a or target.startswith(a + ".") for a in allowed
            ):
                bad.append(f"{module} imports {target}")
    return sorted(bad)


def test_the_domain_imports_nothing_of_the_rest_of_the_project() -> None:
    assert _violations("bot.domain", ("bot.domain",), ("bot", "storage", "signoff")) == []


def test_storage_imports_only_the_domain() -> None:
    assert _violations("storage", ("storage", "bot.domain"), ("bot", "storage", "signoff")) == []




def test_the_agent_side_imports_nothing_of_the_server() -> None:
    assert _violations("signoff", ("signoff",), ("bot", "storage")) == []


def _tests_imported_by_benchmarks() -> list[str]:
    found = []
    for name, path in MODULES.items():
        if not name.startswith("bench"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            found += [f"{name} imports {n}" for n in names if n == "tests" or n.startswith("tests.")]
    return found


# Parsed at collection, like GRAPH: CPython 3.11.7's ast.parse can fail with "AST constructor
# recursion depth mismatch" after a test that recursed deeply (gh-106905); collection runs first.
BENCH_IMPORTS_OF_TESTS = _tests_imported_by_benchmarks()


def test_benchmarks_never_import_the_tests() -> None:
    assert BENCH_IMPORTS_OF_TESTS == []


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(GRAPH.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycles() -> None:
    assert _cycles() == []


def test_the_checker_sees_a_cycle_and_a_violation() -> None:
    """The rules above can fail: a made-up graph with a cycle and an upward import is caught."""
    saved = dict(GRAPH)
    try:
        GRAPH["bot.domain.values"] = GRAPH["bot.domain.values"] | {"bot.approvals.service"}
        assert "bot.domain.values imports bot.approvals.service" in _violations(
            "bot.domain", ("bot.domain",), ("bot", "storage", "signoff"))
        assert any("bot.domain.values" in c and "bot.approvals.service" in c for c in _cycles())
    finally:
        GRAPH.clear()
        GRAPH.update(saved)


# Who may import storage: the use cases (bot/approvals); the agent runner's use cases on runs, which
# own the run store (bot/agent's run_service, runner and steps) and its assembly (app, cli); the
# process, which opens the store and migrates it (bot/process). Nobody else in bot/, not even for types.
STORAGE_USERS = ("bot.approvals", "bot.process", "bot.agent.run_service", "bot.agent.runner", "bot.agent.run_writes",
                 "bot.agent.model_step", "bot.agent.tool_step", "bot.agent.app", "bot.agent.cli")


def _storage_imports(module: str) -> list[str]:
    return sorted(f"{module} imports {t}" for t in GRAPH[module] if t.split(".")[0] == "storage")


def _may_reach_storage(module: str) -> bool:
    return any(module == user or module.startswith(user + ".") for user in STORAGE_USERS)


def test_only_the_use_cases_reach_storage() -> None:
    bad = [line for module in sorted(GRAPH) if module.startswith("bot.") and not _may_reach_storage(module)
           for line in _storage_imports(module)]
    assert bad == []


def test_every_module_named_as_reaching_storage_does() -> None:
    """The list above names no module that has stopped reaching storage (or was renamed): it only shrinks."""
    assert [user for user in STORAGE_USERS
            if not any(_storage_imports(m) for m in GRAPH if m == user or m.startswith(user + "."))] == []


def test_the_storage_rule_sees_an_edge_importing_a_type() -> None:
    saved = GRAPH.get("bot.slack.home")
    try:
        GRAPH["bot.slack.home"] = (saved or set()) | {"storage.base"}
        assert "bot.slack.home imports storage.base" in _storage_imports("bot.slack.home")
        assert not _may_reach_storage("bot.slack.home") and _may_reach_storage("bot.approvals.service")
    finally:
        if saved is None:
            del GRAPH["bot.slack.home"]
        else:
            GRAPH["bot.slack.home"] = saved
