"""requirements.txt, the lock file Heroku's Python buildpack installs, against pyproject.toml.

Refresh it with the command in its header (README, "Deploy"). These checks fail when a dependency is
added to or changed in pyproject.toml without refreshing the lock, or the lock is edited by hand into
something that does not satisfy pyproject.toml.
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
REFRESH = "uv pip compile pyproject.toml --python-version 3.11 -o requirements.txt"
LOCAL = "./client"  # the agent side, installed from the checkout (the server imports it)


def pins() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line == LOCAL:
            continue
        name, sep, version = line.partition("==")
        assert sep and version, f"requirements.txt: {line!r} is not pinned with =="
        found[canonicalize_name(name)] = version.split(";")[0].strip()
    return found


def declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"]]


def test_the_lock_says_how_to_refresh_it() -> None:
    assert REFRESH in (ROOT / "requirements.txt").read_text()
    assert f"`{REFRESH}" in (ROOT / "docs" / "deploy.md").read_text()


def test_every_dependency_is_pinned_within_its_bounds() -> None:
    locked = pins()
    for req in declared():
        name = canonicalize_name(req.name)
        assert name in locked, f"{req.name} is in pyproject.toml but not in requirements.txt: refresh the lock"
        assert req.specifier.contains(locked[name], prereleases=True), (
            f"requirements.txt pins {req.name}=={locked[name]}, outside pyproject.toml's {req.specifier}")


def test_the_lock_is_closed() -> None:
    """What each pinned package requires (as installed here) is pinned too, extras asked for included."""
    locked = pins()
    extras = {canonicalize_name(r.name): set(r.extras) for r in declared()}
    for name in locked:
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # not installed in this environment (another platform's dependency): nothing to read
        for raw in requires:
            req = Requirement(raw)
            wanted = [{"extra": e} for e in extras.get(name, set())] or [{"extra": ""}]
            env = {"python_version": "3.11", "python_full_version": "3.11.0", "sys_platform": "linux",
                   "platform_system": "Linux", "implementation_name": "cpython",
                   "platform_python_implementation": "CPython", "platform_machine": "x86_64", "os_name": "posix"}
            if req.marker is not None and not any(req.marker.evaluate({**env, **w}) for w in wanted):
                continue
            assert canonicalize_name(req.name) in locked, f"{name} needs {req.name}, which requirements.txt lacks"


def test_procfile_runs_from_the_checkout() -> None:
    """The buildpack installs requirements.txt, not the project: the Procfile runs `python -m bot`."""
    steps = dict(line.split(":", 1) for line in (ROOT / "Procfile").read_text().splitlines() if line.strip())
    assert steps["web"].strip() == "python -m bot serve"
    assert steps["release"].strip() == "python -m bot db upgrade"
    assert (ROOT / ".python-version").read_text().strip() == "3.11"


def test_the_lock_installs_the_agent_side_the_server_imports() -> None:
    """A platform that installs only requirements.txt and runs from the checkout (Heroku) still gets
    `signoff`, which the server's /mcp imports and which no longer sits at the checkout's root."""
    lines = [line.split("#", 1)[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    assert LOCAL in lines and (ROOT / LOCAL / "pyproject.toml").is_file()
    assert f"`{REFRESH} && echo {LOCAL} >> requirements.txt`" in (ROOT / "docs" / "deploy.md").read_text()
