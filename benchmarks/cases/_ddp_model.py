"""The model and the step loop of ``ddp_throughput``, shared by every variant.

MLP 784-512-512-10, SGD, cross-entropy, synthetic data: 4 fixed batches per rank
(generated once, so data generation is not timed), cycled. Each step's backward runs
DDP's gradient all-reduce, so ranks move in lockstep and rank 0's clock is the gang's.
"""

from __future__ import annotations

import time
from typing import Any


def make_model() -> Any:
    from torch import nn

    return nn.Sequential(
        nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    )


def run_steps(model: Any, *, batch_size: int, warmup: int, steps: int, rank: int) -> dict[str, Any]:
    """Run ``warmup`` untimed steps, then time ``steps`` steps."""
    import torch
    from torch import nn

    g = torch.Generator().manual_seed(1234 + rank)
    xs = [torch.randn(batch_size, 784, generator=g) for _ in range(4)]
    ys = [torch.randint(0, 10, (batch_size,), generator=g) for _ in range(4)]
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()

    def step(i: int) -> Any:
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xs[i % 4]), ys[i % 4])
        loss.backward()
        opt.step()
        return loss

    for i in range(warmup):
        step(i)
    t0 = time.perf_counter()
    for i in range(steps):
        loss = step(i)
    dt = time.perf_counter() - t0
    return {
        "steps_per_s": steps / dt,
        "step_ms": dt / steps * 1e3,
        "final_loss": float(loss.detach()),
        "steps": steps,
    }
