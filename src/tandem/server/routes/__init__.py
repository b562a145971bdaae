"""The train server's routers, one module per area (``create_app`` in ``app.py`` includes
them): ``service`` (health, cluster, packages), ``jobs`` (jobs, logs, events, calls),
``errors`` (the error answers), ``common`` (what they share). The model registry's routes
are in ``models_api.py``, users/audit/quotas in ``users_api.py``, the dashboard in
``dashboard/``."""
