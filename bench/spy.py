"""Sampling profiles of a running server with py-spy (`pip install py-spy`), and their top entries.

    python -m bench.spy FILE.folded [--top 25]     # summarise a profile bench.all --profile wrote

`Spy(pid, path)` attaches py-spy to a process for the duration of a `with` block and writes collapsed
stacks (one "frame;frame;... count" line per distinct stack). The summary lists the functions with the
most samples on top of the stack (self) and anywhere in it (total), as a share of all samples.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import TracebackType


IDLE = ("EpollSelector.select", "select (selectors.py)", "_connection_worker_thread", "wait (threading.py)",
        "_worker (futures/thread.py)")


class Spy:
    def __init__(self, pid: int, path: Path, rate: int = 250) -> None:
        self.pid, self.path, self.rate = pid, path, rate
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Spy:
        exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        self.proc = subprocess.Popen([exe, "record", "--pid", str(self.pid), "--format", "raw", "--rate",
                                      str(self.rate), "--nonblocking", "-o", str(self.path)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)  # py-spy writes the file on Ctrl-C
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _name(frame: str) -> str:
    """'fn (path/to/module.py:12)' -> 'fn (module.py)'."""
    fn, _, where = frame.partition(" (")
    file = where.rsplit(":", 1)[0].rstrip(")")
    parts = Path(file).parts
    short = "/".join(parts[-2:]) if parts else file
    return f"{fn} ({short})"


def summary(path: Path, top: int = 25) -> str:
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_name(f) for f in stack.split(";")]
        frames = [f for f in frames if not f.startswith("process ")]
        if frames and frames[-1].startswith(IDLE):  # waiting, not working
            continue
        samples += n
        if frames:
            own[frames[-1]] += n
        for f in set(frames):
            total[f] += n
    out = [f"{samples} busy samples (idle waits left out); top {top} by self, then by total (share of all samples)"]
    out += [f"  self  {n / samples:6.1%}  {f}" for f, n in own.most_common(top)]
    out += [f"  total {n / samples:6.1%}  {f}" for f, n in total.most_common(top)
            if "<module>" not in f and not f.startswith("run ") and "run_forever" not in f]
    return "\n".join(out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=25)
    a = parser.parse_args()
    print(summary(a.file, a.top))
