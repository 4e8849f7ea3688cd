"""How many of a completed run's calls ran after a decision and failed: `runs.failed_steps`.

A run whose approved email then failed to send said "Completed" (issue 34, item 4). The count is
fixed when the run completes, so its message can say "Finished with 1 failed step" without reading
every tool call again at each update. Existing runs get 0 (as they were shown).

Revision ID: 0009_run_failed_steps
Revises: 0008_request_owner
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_run_failed_steps"
down_revision = "0008_request_owner"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("failed_steps", sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("failed_steps")
