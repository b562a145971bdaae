"""Groups: which group each user is in, and each group's quota.

Revision ID: users_0002
Revises: users_0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "users_0002"
down_revision = "users_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tandem_groups",
        sa.Column("user", sa.String(64), primary_key=True),
        sa.Column("grp", sa.String(64), nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_table(
        "tandem_group_quotas",
        sa.Column("grp", sa.String(64), primary_key=True),
        sa.Column("quota", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("tandem_group_quotas")
    op.drop_table("tandem_groups")
