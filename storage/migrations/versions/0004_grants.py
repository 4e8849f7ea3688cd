"""Remembered grants (issue 12): "Approve & remember" rows with match, scope and expiry.

Revision ID: 0004_grants
Revises: 0004_votes (written against 0003 in parallel with 0004_votes; chained after it at the merge)
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.schema import Json, UTCDateTime

revision = "0004_grants"
down_revision = "0004_votes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "grants",
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
    )
    op.create_index("ix_grants_tool_live", "grants", ["tool", "revoked_at"])


def downgrade() -> None:
    op.drop_index("ix_grants_tool_live", table_name="grants")
    op.drop_table("grants")
