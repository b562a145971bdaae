"""The model registry as it was before tandem used Alembic.

Revision ID: registry_0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "registry_0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tandem_model_versions",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("location", sa.Text, nullable=False),
        sa.Column("meta", sa.Text, nullable=False),
    )
    op.create_table(
        "tandem_model_aliases",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("alias", sa.String(64), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("tandem_model_aliases")
    op.drop_table("tandem_model_versions")
