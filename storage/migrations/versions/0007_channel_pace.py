"""Slack's per-channel pace shared by replicas: `channel_pace`.

Revision ID: 0007_channel_pace
Revises: 0006_grant_suggestions
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.schema import UTCDateTime

revision = "0007_channel_pace"
down_revision = "0006_grant_suggestions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "channel_pace",
        sa.Column("channel", sa.String(40), primary_key=True),
        sa.Column("next_at", UTCDateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("channel_pace")
