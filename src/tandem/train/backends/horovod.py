"""Horovod: not available in tandem. The names exist (``HorovodConfig``, ``HorovodTrainer``,
``Trainer(backend="horovod")``) and raise ``HorovodUnavailableError`` saying why and what to
use instead; nothing here pretends to run Horovod.

Why (docs/backends.md, "Horovod"): the newest Horovod on PyPI, 0.28.1 (June 2023), does not
build against the torch tandem pins (2.13.0). Built from source with
``HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1
HOROVOD_WITHOUT_TENSORFLOW=1 pip install --no-build-isolation horovod`` (GCC 12.2, CMake
3.25), CMake configures (torch and gloo found) but the torch extension is compiled with
``-std=c++14``, and torch 2.13's headers stop it::

    torch/csrc/api/include/torch/all.h:5:2: error: #error C++17 or later compatible
        compiler is required to use PyTorch.
    ATen/ATen.h:5:2: error: #error C++17 or later compatible compiler is required to use ATen.
    c10/util/StringUtil.h:65:22: error: 'is_enum_v' is not a member of 'std'
"""

from __future__ import annotations

from typing import NoReturn

from tandem._core.errors import TandemError
from tandem.train.backends.base import Backend, BackendConfig

REASON = (
    "Horovod is not available in tandem: the newest Horovod (0.28.1, 2023) does not build "
    "against the pinned torch 2.13.0 (its torch extension is compiled as C++14 and torch "
    "2.13's headers require C++17: \"#error C++17 or later compatible compiler is required "
    "to use PyTorch\"; details in docs/backends.md). Use instead: "
    "tandem.train.torch.TorchTrainer (DDP: gradients all-reduced over torch.distributed, "
    "gloo on CPU / nccl on GPU; Trainer(backend='torch') in the 1.x API), or "
    "tandem.train.tensorflow.TensorflowTrainer for Keras (MultiWorkerMirroredStrategy)."
)


class HorovodUnavailableError(TandemError, NotImplementedError):
    """Horovod cannot be built here; the message says why and what to use instead."""


def unavailable(what: str) -> NoReturn:
    raise HorovodUnavailableError(f"{what}: {REASON}")


class HorovodConfig(BackendConfig):
    """Ray's ``HorovodConfig``; raises ``HorovodUnavailableError`` (see the module docs)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        unavailable("HorovodConfig")

    def backend(self) -> Backend:  # pragma: no cover - __init__ never returns
        unavailable("HorovodConfig")
