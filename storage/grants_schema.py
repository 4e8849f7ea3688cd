"""Tables of remembered grants and delegations (migrations 0004_grants, 0005_delegation and
0006_grant_suggestions and 0018_deny_grants own them, 0016_suggestion_dismissals the dismissals; these mirror them on the
shared metadata)."""

from __future__ import annotations

import sqlalchemy as sa

from storage.schema import Json, UTCDateTime, metadata

BigId = sa.BigInteger().with_variant(sa.Integer, "sqlite")

grants = sa.Table(
    "grants",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("tool", sa.String(200), nullable=False),
    sa.Column("match", Json, nullable=False),
    sa.Column("scope", sa.String(16), nullable=False),
    sa.Column("scope_value", sa.String(200)),
    sa.Column("created_by", sa.String(40), nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("expires_at", UTCDateTime),
    sa.Column("revoked_at", UTCDateTime),
    sa.Column("revoked_by", sa.String(40)),
    sa.Column("request_id", sa.String(40)),
    # 0006: a Claude suggestion's grant lets parameters it does not name be anything.
    sa.Column("any_other_params", sa.Boolean, nullable=False, server_default=sa.false()),
    # 0018: `deny` for a person's deny from the decision record (bot.domain.grants: only ever stricter).
    sa.Column("effect", sa.String(8), nullable=False, server_default="allow"),
    # Submit reads the live grants of one tool: this index keeps that a short range scan.
    sa.Index("ix_grants_tool_live", "tool", "revoked_at"),
)

delegations = sa.Table(
    "delegations",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("user_id", sa.String(40), nullable=False),
    sa.Column("delegate", sa.String(40), nullable=False),
    sa.Column("starts_at", UTCDateTime, nullable=False),
    sa.Column("until", UTCDateTime),
    sa.Column("ended_at", UTCDateTime),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Index("ix_delegations_user", "user_id", "ended_at"),
    sa.Index("ix_delegations_delegate", "delegate", "ended_at"),
)

# 0015: a person's "Dismiss" of a suggestion from the decision record (bot.domain.history): hidden for them.
suggestion_dismissals = sa.Table(
    "suggestion_dismissals",
    metadata,
    sa.Column("user_id", sa.String(40), primary_key=True),
    sa.Column("key_hash", sa.String(64), primary_key=True),
    sa.Column("dismissed_at", UTCDateTime, nullable=False),
)
