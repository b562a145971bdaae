"""Ray's ``ray.air.integrations`` paths: ``.mlflow``, ``.wandb`` and ``.comet`` (experiment
tracking).

Each module needs its tracking package: ``pip install "tandem-ml[mlflow]"`` /
``"tandem-ml[wandb]"`` / ``"tandem-ml[comet]"``; importing the module does not (the package is imported when a
callback is built or ``setup_*`` is called).
"""
