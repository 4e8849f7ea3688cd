"""Suggestions from the decision record in Slack: a person's "Dismiss" hides one for them.

Accepting one makes a grant (the `grants` table, ids under a prefix deterministic in what it allows:
bot.domain.history.grant_prefix); dismissing one is a row here, keyed by the person and the
suggestion's key hash, written once however often they tap.

Revision ID: 0016_suggestion_dismissals
Revises: 0015_run_takeover
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.schema import UTCDateTime

revision = "0016_suggestion_dismissals"
down_revision = "0015_run_takeover"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "suggestion_dismissals",
        sa.Column("user_id", sa.String(40), primary_key=True),
        sa.Column("key_hash", sa.String(64), primary_key=True),
        sa.Column("dismissed_at", UTCDateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("suggestion_dismissals")
