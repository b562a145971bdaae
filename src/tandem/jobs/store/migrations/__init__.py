"""The job store's Alembic revisions (see ``tandem.jobs.store.migrate``)."""
