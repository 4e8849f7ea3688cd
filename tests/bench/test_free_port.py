"""bench.harness.free_port, for the tests' and the benches' servers: two processes never get the same port."""

from __future__ import annotations

import random
import socket
import subprocess
import sys

import bench.harness as harness
from tests.support.app import ROOT

CHILD = """
import sys
import bench.harness as harness
harness.PORTS = range(int(sys.argv[1]), int(sys.argv[2]))
ports = []
while True:
    try:
        ports.append(harness.free_port())
    except RuntimeError:
        break
print(" ".join(map(str, ports)))
"""


def test_a_second_process_never_gets_a_port_the_first_holds(monkeypatch) -> None:
    start = random.randrange(20000, 31900)
    window = range(start, start + 40)
    monkeypatch.setattr(harness, "PORTS", window)
    mine = {harness.free_port() for _ in range(12)}
    child = subprocess.run([sys.executable, "-c", CHILD, str(window.start), str(window.stop)], cwd=ROOT,
                           capture_output=True, text=True, timeout=60, check=True)
    theirs = {int(p) for p in child.stdout.split()}
    assert len(mine) == 12 and mine <= set(window)
    assert theirs and theirs <= set(window)
    assert not mine & theirs, f"both processes were given {sorted(mine & theirs)}"


def test_the_port_is_free_and_outside_the_ephemeral_range() -> None:
    port = harness.free_port()
    low, _high = (int(v) for v in open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    assert port < low
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # nothing listens there
