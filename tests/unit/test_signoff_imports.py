"""The agent-side package stands alone: it never imports the server (bot) or its storage."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.harness import ROOT

FORBIDDEN = ("bot", "storage", "tests")


def test_no_module_of_signoff_imports_the_server() -> None:
    offenders = []
    for path in sorted((ROOT / "signoff").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []


def test_importing_every_signoff_module_loads_nothing_of_the_server() -> None:
    modules = sorted("signoff." + p.stem for p in Path(ROOT / "signoff").glob("*.py") if p.stem != "__init__")
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('bot', 'storage'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
