"""``MyTrainableClass``: the toy class trainable Ray's examples tune (``from
ray.tune.utils.mock_trainable import MyTrainableClass``).

Ported from Ray 2.60's python/ray/tune/utils/mock_trainable.py (Apache-2.0,
ray-project/ray) with the imports swapped to tandem.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np

from tandem.tune.trainable import Trainable

MOCK_TRAINABLE_NAME = "mock_trainable"
MOCK_ERROR_KEY = "mock_error"


class MyTrainableClass(Trainable):
    """Example agent whose learning curve is a random sigmoid.

    The dummy hyperparameters "width" and "height" determine the slope and
    maximum reward value reached.
    """

    def setup(self, config: dict[str, Any], **kwargs: object) -> None:
        self._sleep_time = config.get("sleep", 0)
        self._mock_error = config.get(MOCK_ERROR_KEY, False)
        self._persistent_error = config.get("persistent_error", False)
        self.timestep = 0
        self.restored = False

    def step(self) -> dict[str, Any]:
        if (
            self._mock_error
            and self.timestep > 0  # allow at least 1 successful checkpoint.
            and (self._persistent_error or not self.restored)
        ):
            raise RuntimeError(f"Failing on purpose! {self.timestep=}")
        if self._sleep_time > 0:
            time.sleep(self._sleep_time)
        self.timestep += 1
        v = np.tanh(float(self.timestep) / self.config.get("width", 1))
        v *= self.config.get("height", 1)
        # Here we use `episode_reward_mean`, but you can also report other
        # objectives such as loss or accuracy.
        return {"episode_reward_mean": v}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        path = os.path.join(checkpoint_dir, "checkpoint")
        with open(path, "w") as f:
            f.write(json.dumps({"timestep": self.timestep}))

    def load_checkpoint(self, checkpoint_dir: Any) -> None:
        path = os.path.join(checkpoint_dir, "checkpoint")
        with open(path) as f:
            self.timestep = json.loads(f.read())["timestep"]
        self.restored = True
