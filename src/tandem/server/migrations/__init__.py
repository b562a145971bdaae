"""The users store's Alembic revisions (users, owners, audit log, quotas; see
``tandem.jobs.store.migrate``)."""
