"""tandem's benchmarks: speed and memory, compared with peers (Ray Tune / Ray Train V2,
Optuna, plain ``torchrun``). Run ``python -m benchmarks --help``."""
