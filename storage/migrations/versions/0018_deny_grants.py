"""Deny grants: a person's one-tap "deny?" from the decision record is a grant row with `effect = 'deny'`.

It lives beside the allow grants so it is scoped, expires, is audited, listed and revoked exactly like them,
and every replica sees it at the next submit of its tool (the tool's grant stamp moves: storage/grants.py).
Existing rows are allow grants.

Revision ID: 0018_deny_grants
Revises: 0017_key_rotation
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_deny_grants"
down_revision = "0017_key_rotation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("grants") as batch:
        batch.add_column(sa.Column("effect", sa.String(8), nullable=False, server_default="allow"))


def downgrade() -> None:
    with op.batch_alter_table("grants") as batch:
        batch.drop_column("effect")
