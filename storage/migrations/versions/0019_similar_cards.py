"""Similar-requests cards that follow their requests: the card, its ts and the state its last update shows,
and which card each request is on (at most one).

Revision ID: 0019_similar_cards
Revises: 0018_deny_grants
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.schema import Json, UTCDateTime

revision = "0019_similar_cards"
down_revision = "0018_deny_grants"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "similar_cards",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("channel", sa.String(40), nullable=False),
        sa.Column("tool", sa.String(200), nullable=False),
        sa.Column("shape", Json, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("ts", sa.String(40)),
        sa.Column("state", sa.String(64), nullable=False),
        sa.Column("closed_at", UTCDateTime),
    )
    op.create_index("ix_similar_cards_open", "similar_cards", ["closed_at"])
    op.create_table(
        "similar_members",
        sa.Column("request_id", sa.String(40), primary_key=True),
        sa.Column("card_id", sa.String(40), nullable=False),
        sa.Column("added_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_similar_members_card", "similar_members", ["card_id"])


def downgrade() -> None:
    op.drop_table("similar_members")
    op.drop_table("similar_cards")
