"""The loaded policy of this process: loaded at start-up (a bad file stops the start), reloaded on
SIGHUP (a bad file keeps the policy in force and says why in the log and in `status()`).

Readers take `holder.policy` once per evaluation: a reload swaps one reference, so an evaluation
never sees half of one file and half of another.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from bot.process.clock import Clock, SystemClock
from bot.domain.model import iso
from bot.domain.policy import Policy
from bot.policy.file import PolicyError, load_policy

log = logging.getLogger("signoff.policy")


class PolicyHolder:
    def __init__(self, path: str | None, *, clock: Clock | None = None) -> None:
        self.path = path
        self.clock = clock or SystemClock()
        self.policy: Policy | None = None
        self.loaded_at: datetime | None = None
        self.last_error: str | None = None
        self.reloads = 0
        if path is not None:
            self.policy = load_policy(path)  # PolicyError (a SettingsError): start-up fails with file:line: why
            self.loaded_at = self.clock.now()
            log.info("policy loaded", extra={"path": path, "rules": len(self.policy.rules),
                                             "sha256": self.policy.sha256})

    def reload(self) -> bool:
        """Read the file again; on any problem keep the current policy and log why. True if swapped."""
        if self.path is None:
            log.info("SIGHUP: no policy file (SIGNOFF_POLICY is not set); nothing to reload")
            return False
        try:
            policy = load_policy(self.path)
        except PolicyError as exc:
            self.last_error = str(exc)
            log.error("policy reload failed; keeping the policy in force", extra={"problem": str(exc)})
            return False
        self.policy, self.loaded_at, self.last_error = policy, self.clock.now(), None
        self.reloads += 1
        log.info("policy reloaded", extra={"path": self.path, "rules": len(policy.rules), "sha256": policy.sha256})
        return True

    def status(self) -> dict[str, Any]:
        policy = self.policy
        return {
            "loaded": policy is not None,
            "path": self.path,
            "sha256": policy.sha256 if policy else None,
            "rules": len(policy.rules) if policy else 0,
            "loaded_at": iso(self.loaded_at),
            "reloads": self.reloads,
            "last_error": self.last_error,
        }
