"""Ray Train V2's module paths (``ray.train.v2...``), for code that imports from them.

Thin re-exports of the classes ``tandem.train`` already has; see docs/migration.md's
compatibility table for what each one does.
"""
