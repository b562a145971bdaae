"""The Model object on its own: config, setup once, predict, save/load round trips."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import ClassVar

import numpy as np
import pytest
import torch

from tandem import model
from tandem._core.errors import ConfigError
from tandem.train import Checkpoint


class Linear(model.TorchModel):
    default_config: ClassVar[dict] = {"hidden": 4, "lr": 0.01, "nested": {"a": 1}}

    def setup(self):
        self.setups = getattr(self, "setups", 0) + 1
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(3, self.config["hidden"]), torch.nn.ReLU(),
            torch.nn.Linear(self.config["hidden"], 2))
        self.scale = torch.nn.Linear(2, 2, bias=False)

    def forward(self, x):
        return self.scale(self.net(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.forward(x), y)


def test_config_is_defaults_updated_and_deep_copied():
    m = Linear({"hidden": 8})
    assert m.config == {"hidden": 8, "lr": 0.01, "nested": {"a": 1}}
    m.config["nested"]["a"] = 2
    assert Linear.default_config["nested"]["a"] == 1
    assert not m.is_setup  # construction does no heavy work


def test_config_must_be_a_mapping():
    with pytest.raises(ConfigError, match="config must be a dict"):
        Linear([1, 2])  # type: ignore[arg-type]


def test_setup_runs_once_and_predict_is_eval_no_grad():
    m = Linear()
    x = np.ones((5, 3))
    out = m.predict(x)
    assert isinstance(out, torch.Tensor) and out.shape == (5, 2)
    assert not out.requires_grad
    m(x)
    assert m.setups == 1 and m.is_setup
    assert m.net.training  # the module's mode is restored after predict
    assert torch.equal(m(x.tolist()), out)  # raw lists become float tensors


def test_predict_stacks_a_list_of_tensors():
    m = Linear()
    rows = [torch.ones(3), torch.zeros(3)]
    assert m.predict(rows).shape == (2, 2)


def test_predict_runs_in_eval_mode():
    class Dropout(Linear):
        def setup(self):
            super().setup()
            self.drop = torch.nn.Dropout(0.99)

        def forward(self, x):
            return self.drop(super().forward(x))

    m = Dropout()
    x = np.ones((50, 3))
    assert torch.equal(m.predict(x), m.predict(x))  # dropout off


def test_missing_setup_or_forward_is_named():
    class NoForward(model.TorchModel):
        def setup(self):
            self.net = torch.nn.Linear(1, 1)

    class Nothing(model.TorchModel):
        pass

    with pytest.raises(model.ModelDefinitionError, match=r"NoForward does not define forward\(\)"):
        NoForward.check_definition()
    with pytest.raises(model.ModelDefinitionError, match=r"setup\(\) and forward\(\)"):
        Nothing.check_definition()
    with pytest.raises(model.ModelDefinitionError, match=r"does not define forward\(x\)"):
        NoForward().predict([[1.0]])
    class NoStep(NoForward):
        def forward(self, x):
            return self.net(x)

    NoStep.check_definition()
    with pytest.raises(model.ModelDefinitionError, match=r"NoStep does not define training_step"):
        NoStep.check_training_definition()
    Linear.check_training_definition()


def test_async_setup_and_forward_are_awaited():
    class Async(model.TorchModel):
        async def setup(self):
            self.net = torch.nn.Linear(3, 1)

        async def forward(self, x):
            return self.net(x)

    out = Async().predict(np.ones((2, 3)))
    assert isinstance(out, torch.Tensor) and out.shape == (2, 1)


def test_save_load_round_trip(tmp_path):
    m = Linear({"hidden": 6})
    m.ensure_setup()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(1.5)
    d = str(tmp_path / "m")
    m.save(d)
    assert sorted(os.listdir(d)) == ["model.pkl", "model.pt", "tandem_model.json"]
    with open(os.path.join(d, "tandem_model.json")) as f:
        meta = json.load(f)
    assert meta["class"] == "Linear" and meta["torch_version"] == torch.__version__
    assert meta["config"]["hidden"] == 6
    back = model.Model.load(d)
    assert type(back) is Linear and back.config == m.config
    x = np.random.default_rng(0).normal(size=(4, 3))
    assert torch.allclose(back.predict(x), m.predict(x))
    # weights only into a fresh instance
    fresh = Linear({"hidden": 6})
    fresh.load_weights(d)
    assert torch.allclose(fresh.predict(x), m.predict(x))


def test_from_checkpoint_and_path(tmp_path):
    m = Linear()
    m.ensure_setup()
    d = tmp_path / "ckpt"
    m.save(str(d))
    x = np.ones((1, 3))
    for ref in (Checkpoint.from_directory(d), str(d), d):
        assert torch.allclose(model.TorchModel.from_checkpoint(ref).predict(x), m.predict(x))


def test_load_errors_name_the_directory(tmp_path):
    with pytest.raises(ConfigError, match="is missing"):
        model.Model.load(str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="has no model.pkl"):
        model.Model.load(str(tmp_path))
    m = Linear()
    m.save(str(tmp_path / "a"))
    other = Linear({"hidden": 9})
    with pytest.raises(RuntimeError, match="size mismatch"):
        other.load_weights(str(tmp_path / "a"))

    class Fewer(model.TorchModel):
        def setup(self):
            self.net = torch.nn.Linear(3, 2)

        def forward(self, x):
            return self.net(x)

    with pytest.raises(ConfigError, match=r"missing \[\]"):
        Fewer().load_weights(str(tmp_path / "a"))


def test_class_from_a_script_loads_in_another_process(tmp_path):
    """The class is pickled by value: a process that cannot import the script loads it."""
    script = tmp_path / "script_dir" / "mymodels.py"
    script.parent.mkdir()
    script.write_text(textwrap.dedent("""
        import torch
        from tandem import model

        OFFSET = 3.0

        class Shifted(model.TorchModel):
            default_config = {"n": 2}
            def setup(self):
                self.net = torch.nn.Linear(self.config["n"], 1)
                torch.nn.init.constant_(self.net.weight, 1.0)
                torch.nn.init.constant_(self.net.bias, 0.0)
            def forward(self, x):
                return self.net(x) + OFFSET
    """))
    out = str(tmp_path / "saved")
    env = {**os.environ}
    subprocess.run([sys.executable, "-c", (f"import sys; sys.path.insert(0, {str(script.parent)!r});"
                    f"import mymodels; mymodels.Shifted({{'n': 3}}).save({out!r})")],
                   check=True, env=env, cwd=str(tmp_path))
    res = subprocess.run([sys.executable, "-c", (f"from tandem import model; m = model.Model.load({out!r});"
                          "print(type(m).__name__, float(m.predict([[1, 1, 1]])[0, 0]))")],
                         check=True, env=env, cwd="/", capture_output=True, text=True)
    assert res.stdout.split() == ["Shifted", "6.0"]


def test_main_class_by_value(tmp_path):
    out = str(tmp_path / "saved")
    code = textwrap.dedent(f"""
        import torch
        from tandem import model
        class M(model.TorchModel):
            def setup(self): self.net = torch.nn.Identity(); self.w = torch.nn.Linear(1, 1)
            def forward(self, x): return self.net(x) * 2
        M().save({out!r})
    """)
    subprocess.run([sys.executable, "-c", code], check=True)
    m = model.Model.load(out)
    assert float(m.predict([[2.0]])[0, 0]) == 4.0


def test_base_model_has_no_weights_format(tmp_path):
    class Plain(model.Model):
        def setup(self):
            pass

        def forward(self, x):
            return x * 2

    assert Plain().predict([1, 2]).tolist() == [2.0, 4.0]
    assert Plain.hyperparameter_space() == {}
    with pytest.raises(NotImplementedError, match="save_weights"):
        Plain().save(str(tmp_path))


def test_default_optimizer_uses_lr():
    m = Linear({"lr": 0.5})
    m.ensure_setup()
    opt = m.configure_optimizers()
    assert isinstance(opt, torch.optim.Adam) and opt.param_groups[0]["lr"] == 0.5
    assert sum(len(g["params"]) for g in opt.param_groups) == 5


def test_model_result_from_result_and_no_checkpoint(tmp_path):
    from tandem.train import Result

    m = Linear()
    m.save(str(tmp_path / "ck"))
    r = Result(metrics={"epoch": 1}, checkpoint=Checkpoint.from_directory(tmp_path / "ck"),
               path=str(tmp_path), config={"x": 1})
    mr = model.ModelResult.from_result(r)
    assert isinstance(mr, Result) and mr.metrics == {"epoch": 1} and mr.config == {"x": 1}
    assert isinstance(mr.model, Linear) and mr.model is mr.model  # built once
    empty = model.ModelResult.from_result(Result(metrics=None, checkpoint=None, path="/runs/x",
                                                 error=RuntimeError("boom")))
    with pytest.raises(ConfigError, match=r"/runs/x\) has no checkpoint.*It failed: boom"):
        _ = empty.model
