"""What a test needs from the machine: missing on a developer's machine, it skips and says what to
install; in CI (`CI` set: .ci/run installs all of it) the same absence fails, so a skip there is
never counted as a pass."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def cannot_run(message: str) -> NoReturn:
    """Skip with `message`, or fail with it when CI is set."""
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {message}", pytrace=False)
    pytest.skip(message)
