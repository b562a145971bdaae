"""The model registry's Alembic revisions (see ``tandem.jobs.store.migrate``)."""
