"""Delegation while away (issue 12): `/signoff away until ... to @bob`.

Revision ID: 0005_delegation
Revises: 0004_grants
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.schema import UTCDateTime

revision = "0005_delegation"
down_revision = "0004_grants"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    op.create_table(
        "delegations",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.String(40), nullable=False),
        sa.Column("delegate", sa.String(40), nullable=False),
        sa.Column("starts_at", UTCDateTime, nullable=False),
        sa.Column("until", UTCDateTime),
        sa.Column("ended_at", UTCDateTime),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_delegations_user", "delegations", ["user_id", "ended_at"])
    op.create_index("ix_delegations_delegate", "delegations", ["delegate", "ended_at"])


def downgrade() -> None:
    op.drop_index("ix_delegations_delegate", table_name="delegations")
    op.drop_index("ix_delegations_user", table_name="delegations")
    op.drop_table("delegations")
