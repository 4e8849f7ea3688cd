"""Resume claims held by the server: `resume_claims`.

Resumers of LangGraph threads (and of other frameworks' suspended runs) kept their claims in a
SQLite file beside the checkpoints, so resumers on two machines could both resume one thread. The
claims now live here, one row per (API token, key), shared by every resumer that reaches the server.

Revision ID: 0010_resume_claims
Revises: 0009_run_failed_steps
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.schema import Json, UTCDateTime

revision = "0010_resume_claims"
down_revision = "0009_run_failed_steps"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "resume_claims",
        sa.Column("token", sa.String(100), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("lease_until", UTCDateTime, nullable=False),
        sa.Column("request_ids", Json, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("resume_claims")
