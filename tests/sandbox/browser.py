"""Headless Chromium (Debian's `chromium` package) driven by Playwright, and `signoff demo` as a process.

No browser is ever downloaded: Playwright is pointed at the system's /usr/bin/chromium. Where it is
missing, the browser tests are skipped, except under CI=true, where that fails the run loudly
(`.ci/run` installs the package).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.app import ROOT
from tests.support.needs import cannot_run
from bench.harness import free_port

CHROMIUM = os.environ.get("SIGNOFF_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def require_chromium() -> None:
    if shutil.which(CHROMIUM) or Path(CHROMIUM).exists():
        return
    cannot_run(f"{CHROMIUM} is missing: apt-get install -y chromium (the browser tests need it)")


@dataclass
class DemoProcess:
    """`python -m bot demo` on a free port, read until it prints its banner."""

    url: str
    token: str
    workdir: Path
    proc: subprocess.Popen[str]
    log: Path
    printed: str = ""  # what it printed once ready
    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            return json.loads(resp.read())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


HEADER = "# to try an integration, paste:"


def exported(demo: DemoProcess) -> dict[str, str]:
    """The three `export` lines after the header, as the shell would read them; checks their exact shape."""
    lines = demo.printed.splitlines()
    assert HEADER in lines, demo.printed
    at = lines.index(HEADER)
    names = [line.split("=", 1)[0] for line in lines[at + 1:at + 4]]
    assert names == ["export SIGNOFF_URL", "export SIGNOFF_TOKEN", "export SIGNOFF_CHANNEL"], demo.printed
    return {line.split("=", 1)[0].removeprefix("export "): line.split("=", 1)[1] for line in lines[at + 1:at + 4]}


def start_demo(tmp: Path, *args: str, program: list[str] | None = None, **env: str) -> DemoProcess:
    """Start it in `tmp`, its token kept in `tmp`/state (XDG_STATE_HOME) unless `env` says otherwise.

    `program`: how to start it (default `python -m bot demo`; the docs' tests give the console script)."""
    port = free_port()
    log = tmp / "demo.log"
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("SIGNOFF_", "ANTHROPIC_", "SLACK_"))}
    if program is None:
        full_env.update(PYTHONPATH=str(ROOT))
    else:
        full_env.pop("PYTHONPATH", None)
    full_env.update(XDG_STATE_HOME=str(tmp / "state"))
    full_env.update(env)
    command = [*(program or [sys.executable, "-m", "bot"]), "demo", "--port", str(port), *args]
    with open(log, "w") as stderr:
        proc = subprocess.Popen(command, cwd=tmp, env=full_env, stdout=subprocess.PIPE, stderr=stderr, text=True)
    assert proc.stdout is not None
    banner = []
    deadline = time.monotonic() + 120
    for line in proc.stdout:  # blocks until the demo prints (it does once it listens)
        banner.append(line)
        if line.startswith("Stop with Ctrl-C") or time.monotonic() > deadline:
            break
    text = "".join(banner)
    token = re.search(r"bearer token (\S+)", text)
    database = re.search(r"SQLite at (\S+)", text)
    if token is None or database is None:
        proc.kill()
        proc.wait(5)
        proc.stdout.close()
        raise AssertionError(f"signoff demo did not start:\n{text}\n{log.read_text()[-4000:]}")
    return DemoProcess(f"http://127.0.0.1:{port}", token.group(1), Path(database.group(1)).parent, proc, log, text)
