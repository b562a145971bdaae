"""The users store as it was before tandem used Alembic.

Revision ID: users_0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "users_0001"
down_revision = None
branch_labels = None
depends_on = None

_BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "tandem_users",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("token_id", sa.String(32), nullable=False, unique=True),
        sa.Column("token_hash", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("created_by", sa.String(64), nullable=True),
        sa.Column("revoked_at", sa.Float, nullable=True),
    )
    op.create_table(
        "tandem_owners",
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("key", sa.String(1024), primary_key=True),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "tandem_audit",
        sa.Column("id", _BigId, primary_key=True, autoincrement=True),
        sa.Column("time", sa.Float, nullable=False),
        sa.Column("user", sa.String(64), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target", sa.Text, nullable=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
        sa.Column("detail", sa.Text, nullable=True),
    )
    op.create_index("ix_tandem_audit_time", "tandem_audit", ["time"])
    op.create_index("ix_tandem_audit_user", "tandem_audit", ["user", "time"])
    op.create_table(
        "tandem_quotas",
        sa.Column("owner", sa.String(64), primary_key=True),
        sa.Column("quota", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    for table in ("tandem_quotas", "tandem_audit", "tandem_owners", "tandem_users"):
        op.drop_table(table)
