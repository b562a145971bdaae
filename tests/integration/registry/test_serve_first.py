"""The first deployment of a fresh program (issue 25): ``model.serve("name@1")`` right
after ``import tandem.model`` answers correctly, and its replica imported only what serving
needs: no SQL, no training or tuning code (checked inside the replica, by its model); nor
did the program (its registry lookup read with the stdlib's sqlite3)."""

from __future__ import annotations

import json
import os

import pytest

from tests.integration.registry._util import check, run_script

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

REGISTER = """
import numpy as np
from tandem import model


class Probe(model.TorchModel):
    def setup(self):
        import torch

        self.net = torch.nn.Linear(3, 1)
        with torch.no_grad():
            self.net.weight.copy_(torch.tensor([[1.0, 2.0, 3.0]]))
            self.net.bias.fill_(0.5)

    def forward(self, x):
        return self.net(x)

    def predict(self, inputs):
        import sys

        import torch

        y = self.net(torch.tensor(inputs, dtype=torch.float32))[:, 0].tolist()
        here = [m for m in ("sqlalchemy", "alembic", "tandem.train", "tandem.tune",
                            "tandem.model._loop", "uvicorn") if m in sys.modules]
        return [[v, here, "torch" in sys.modules] for v in y]


m = Probe()
m.ensure_setup()
print(model.put(m, name="probe"))
"""

SERVE = """
import json, sys, time
import urllib.request
t0 = time.perf_counter()
from tandem import model
from tandem.cluster import local

at_import = local.early_zygote_modules()
handle = model.serve("probe@1", serve_settings={"route_prefix": "/probe"})
try:
    req = urllib.request.Request(handle.url + "/predict", method="POST",
                                 data=json.dumps({"inputs": [[1, 1, 1], [0, 0, 2]]}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        answer = json.loads(r.read())
    first = time.perf_counter() - t0
    driver = [m for m in ("tandem.train", "tandem.tune", "torch", "sqlalchemy", "alembic")
              if m in sys.modules]
finally:
    handle.stop()
print(json.dumps({"answer": answer, "at_import": at_import, "driver": driver,
                  "first_s": first}))
"""


def test_the_first_deployment_answers_and_its_replica_loaded_no_training_or_sql(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("TANDEM_ADDRESS",
                                                             "TANDEM_MODELS_STORAGE")}
    env.update({"TANDEM_MODELS_PATH": str(tmp_path / "models"), "TANDEM_ADDRESS": "local",
                "TANDEM_EARLY_IMPORT": "1", "TANDEM_HOME": str(tmp_path / "home")})
    # registered by another process, as `tandem serve probe@1` finds it
    assert "probe@1" in check(run_script(REGISTER, str(tmp_path), env=env, timeout=200))
    out = json.loads(check(run_script(SERVE, str(tmp_path), env=env, timeout=250))
                     .strip().splitlines()[-1])
    assert out["at_import"] == ["torch", "tandem.model.serve._replica"]
    (a, here_a, torch_a), (b, here_b, torch_b) = out["answer"]["outputs"]
    assert (a, b) == (6.5, 6.5)  # 1+2+3+0.5 and 2*3+0.5: the registered weights
    assert here_a == here_b == [], "the replica imported training, tuning or SQL code"
    assert torch_a and torch_b
    # the driver serving a registered torch model never imports torch, the training code
    # or SQL (the local registry is read with the stdlib's sqlite3)
    assert out["driver"] == []
