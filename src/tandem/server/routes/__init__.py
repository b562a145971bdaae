"""The train server's routers, one module per area (``create_app`` in ``app.py`` includes
them): ``service`` (health, cluster, packages), ``jobs`` (jobs, logs, events, calls),
``models`` (the model registry), ``errors`` (the error answers), ``common`` (what they
share). Users/audit/quotas are in ``users_api.py``, the dashboard in ``dashboard/``."""
