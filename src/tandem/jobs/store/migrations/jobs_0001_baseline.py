"""The job store as it was before tandem used Alembic (``schema_version`` 1).

Revision ID: jobs_0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "jobs_0001"
down_revision = None
branch_labels = None
depends_on = None

# Autoincrementing 64-bit ids: SQLite only autoincrements a column declared INTEGER.
_BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _job_fk() -> sa.ForeignKey:
    return sa.ForeignKey("tandem_jobs.job_id", ondelete="CASCADE")


def upgrade() -> None:
    meta = op.create_table(
        "tandem_meta",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    op.create_table(
        "tandem_jobs",
        sa.Column("job_id", sa.String(128), primary_key=True),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("tags", sa.Text, nullable=False),
        sa.Column("submitted_at", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float, nullable=True),
        sa.Column("ended_at", sa.Float, nullable=True),
        sa.Column("spec", sa.LargeBinary, nullable=True),
        sa.Column("spec_json", sa.Text, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("traceback", sa.Text, nullable=True),
        sa.Column("result", sa.Text, nullable=True),
    )
    op.create_index("ix_tandem_jobs_submitted", "tandem_jobs", ["submitted_at", "job_id"])
    op.create_index("ix_tandem_jobs_state", "tandem_jobs", ["state", "submitted_at"])
    op.create_index("ix_tandem_jobs_name", "tandem_jobs", ["name", "submitted_at"])
    op.create_table(
        "tandem_job_tags",
        sa.Column("job_id", sa.String(128), _job_fk(), primary_key=True),
        sa.Column("tag", sa.String(256), primary_key=True),
    )
    op.create_index("ix_tandem_job_tags_tag", "tandem_job_tags", ["tag", "job_id"])
    op.create_table(
        "tandem_transitions",
        sa.Column("id", _BigId, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(128), _job_fk(), nullable=False),
        sa.Column("from_state", sa.String(32), nullable=True),
        sa.Column("to_state", sa.String(32), nullable=False),
        sa.Column("time", sa.Float, nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
    )
    op.create_index("ix_tandem_transitions_job", "tandem_transitions", ["job_id", "id"])
    op.create_table(
        "tandem_reports",
        sa.Column("job_id", sa.String(128), _job_fk(), primary_key=True),
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("rank", sa.Integer, nullable=True),
        sa.Column("time", sa.Float, nullable=False),
        sa.Column("metrics", sa.Text, nullable=False),
        sa.Column("checkpoint_path", sa.Text, nullable=True),
    )
    op.create_table(
        "tandem_usage",
        sa.Column("id", _BigId, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(128), _job_fk(), nullable=False),
        sa.Column("rank", sa.Integer, nullable=False),
        sa.Column("time", sa.Float, nullable=False),
        sa.Column("cpu_percent", sa.Float, nullable=False),
        sa.Column("rss_bytes", sa.BigInteger, nullable=False),
        sa.Column("gpu_util", sa.Float, nullable=True),
        sa.Column("gpu_mem_bytes", sa.BigInteger, nullable=True),
    )
    op.create_index("ix_tandem_usage_job_time", "tandem_usage", ["job_id", "time", "rank"])
    # An older tandem (before Alembic) opens the store only at schema_version 1: a revision
    # that an older reader cannot read bumps it.
    op.bulk_insert(meta, [{"key": "schema_version", "value": "1"}])


def downgrade() -> None:
    for table in ("tandem_usage", "tandem_reports", "tandem_transitions", "tandem_job_tags",
                  "tandem_jobs", "tandem_meta"):
        op.drop_table(table)
