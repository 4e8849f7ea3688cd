"""The agent-side package stands alone at run time: importing any of it loads nothing of the server.

(tests/project/test_imports.py checks the source; this checks what an import really loads.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.app import ROOT


def test_importing_every_signoff_module_loads_nothing_of_the_server() -> None:
    modules = sorted("signoff." + p.stem for p in Path(ROOT / "client" / "signoff").glob("*.py") if p.stem != "__init__")
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('bot', 'storage'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
