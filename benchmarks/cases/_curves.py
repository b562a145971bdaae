"""Synthetic learning curves for the ``asha`` and ``scale`` cases (standard library only).

A config is ``{"x": float, "y": float}`` in [0, 1]². Its noise-free loss after ``t``
steps is ``a·exp(-b·t) + c`` with ``a = 0.5 + 1.5x``, ``b = 0.03 + 0.4y`` and
``c = 0.05 + 0.3(x - 0.65)² + 0.25y²``: a large ``y`` converges fast but plateaus high,
so a greedy early-stopper can be fooled, as with real learning rates. The observed loss
adds Gaussian noise (σ = 0.02) seeded by (seed, config, t): every system sees the same
numbers, in any process.
"""

from __future__ import annotations

import math
import random
from typing import Any

NOISE = 0.02


def configs(seed: int, n: int) -> list[dict[str, float]]:
    rng = random.Random(seed)
    return [{"x": round(rng.random(), 6), "y": round(rng.random(), 6)} for _ in range(n)]


def true_loss(cfg: dict[str, Any], t: int) -> float:
    x, y = float(cfg["x"]), float(cfg["y"])
    a = 0.5 + 1.5 * x
    b = 0.03 + 0.4 * y
    c = 0.05 + 0.3 * (x - 0.65) ** 2 + 0.25 * y**2
    return a * math.exp(-b * t) + c


def observed_loss(cfg: dict[str, Any], t: int, seed: int) -> float:
    rng = random.Random(f"{seed}:{float(cfg['x']):.6f}:{float(cfg['y']):.6f}:{t}")
    return true_loss(cfg, t) + NOISE * rng.gauss(0.0, 1.0)
