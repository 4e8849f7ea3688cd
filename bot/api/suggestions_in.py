"""The `suggestions` field of `POST /api/v1/approvals`: Claude's permission updates, validated.

Shapes are Claude Code's (`PermissionUpdate` in the Agent SDK; `permission_suggestions` of a
PermissionRequest hook). The known fields are checked (a malformed known shape is a 400 naming
the field, nothing written); types and destinations Signoff does not map are accepted, shown on
the card and not offered (`bot.domain.suggestions`), so a newer Claude Code never breaks an
approval. Unknown extra keys are kept: the agent gets back exactly what it sent.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bot.domain.suggestions import MAX_SUGGESTIONS

MAX_SUGGESTIONS_BYTES = 16 * 1024
RULE_TYPES = ("addRules", "replaceRules", "removeRules")


class RuleIn(BaseModel):
    model_config = ConfigDict(extra="allow")
    toolName: str = Field(min_length=1, max_length=200)  # noqa: N815 - Claude's spelling
    ruleContent: str | None = Field(default=None, max_length=2000)  # noqa: N815


class SuggestionIn(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str = Field(min_length=1, max_length=40)
    destination: str | None = Field(default=None, min_length=1, max_length=40)
    behavior: str | None = Field(default=None, min_length=1, max_length=20)
    rules: list[RuleIn] | None = Field(default=None, max_length=20)
    mode: str | None = Field(default=None, max_length=40)
    directories: list[str] | None = Field(default=None, max_length=20)

    @model_validator(mode="after")
    def _shape_of_type(self) -> SuggestionIn:
        # What Claude Code itself requires of these types (it rejects the update otherwise).
        if self.type in RULE_TYPES:
            if not self.rules:
                raise ValueError(f"a {self.type} suggestion needs `rules` (a list of {{toolName, ruleContent}})")
            if self.behavior not in ("allow", "deny", "ask"):
                raise ValueError(f"a {self.type} suggestion needs `behavior`: allow, deny or ask")
        elif self.type == "setMode" and not self.mode:
            raise ValueError("a setMode suggestion needs `mode`")
        elif self.type in ("addDirectories", "removeDirectories") and self.directories is None:
            raise ValueError(f"a {self.type} suggestion needs `directories`")
        return self


def check_size(value: list[SuggestionIn] | None) -> list[SuggestionIn] | None:
    if value is not None and len(json.dumps(stored(value))) > MAX_SUGGESTIONS_BYTES:
        raise ValueError(f"must be at most {MAX_SUGGESTIONS_BYTES // 1024} KB as JSON")
    return value


def stored(value: list[SuggestionIn]) -> list[dict[str, Any]]:
    """The suggestions as the agent sent them (only the keys it gave), for `request.extra`."""
    return [s.model_dump(mode="json", exclude_unset=True) for s in value]


def suggestion_extra(suggestions: list[SuggestionIn] | None, session: str | None) -> dict[str, Any]:
    """What a request keeps of them (its `extra`): the suggestions as sent, and the session."""
    extra: dict[str, Any] = {}
    if suggestions:
        extra["suggestions"] = stored(suggestions)
    if session is not None:
        extra["session"] = session
    return extra


__all__ = ["MAX_SUGGESTIONS", "SuggestionIn", "check_size", "stored", "suggestion_extra"]
