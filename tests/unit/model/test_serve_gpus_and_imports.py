"""model.serve's GPU options (refused before anything starts where the cluster has too
few) and what the replicas' launcher imports ahead of them (read from the saved model)."""

from __future__ import annotations

import numpy as np
import pytest

import tandem
from tandem import model
from tandem._core.errors import ConfigError
from tandem.model.serve import ServeSettings
from tandem.model.serve._runner import serve_imports


@pytest.mark.parametrize("kwargs", [
    {"num_gpus": 1},
    {"serve_settings": {"num_gpus": 0.5, "num_replicas": 3}},
    {"serve_settings": {"ray_actor_options": {"num_gpus": 1}}},
])
def test_gpus_asked_of_a_cluster_without_them_are_refused_before_anything_starts(
        kwargs, monkeypatch):
    monkeypatch.delenv("TANDEM_ADDRESS", raising=False)
    tandem.init(num_cpus=2, num_gpus=0)
    svc = tandem.jobs.get_service()
    with pytest.raises(ConfigError) as e:
        model.serve("no-such-model@1", **kwargs)  # refused before the reference is read
    msg = str(e.value)
    assert "per replica" in msg and "this cluster has GPU=0" in msg
    assert "leave num_gpus unset" in msg and "tandem.init(num_gpus=N)" in msg
    assert tandem.jobs.list() == [] and svc.cluster.live_worker_pids() == []


def test_fractions_of_one_declared_gpu_fit_and_whole_ones_beyond_it_do_not(monkeypatch):
    from tandem.model.serve._api import _check_gpus

    one = {"CPU": 4.0, "GPU": 1.0}
    _check_gpus(ServeSettings(num_gpus=0.5, num_replicas=2), one)  # two halves of one GPU
    with pytest.raises(ConfigError, match=r"num_gpus=0.5 per replica \(3 replica"):
        _check_gpus(ServeSettings(num_gpus=0.5, num_replicas=3), one)
    with pytest.raises(ConfigError, match=r"2 GPU\(s\) in all\), but this cluster has GPU=1"):
        _check_gpus(ServeSettings(num_gpus=1, num_replicas=2), one)


def test_gpu_settings_make_the_replica_bundle_and_bad_ones_say_what_to_give():
    assert ServeSettings(num_gpus=1).bundle() == {"CPU": 1.0, "GPU": 1.0}
    assert ServeSettings(ray_actor_options={"num_cpus": 2, "num_gpus": 0.5,
                                            "resources": {"accel": 1}}).bundle() == \
        {"CPU": 2.0, "GPU": 0.5, "accel": 1.0}
    with pytest.raises(ConfigError, match="num_gpus=-1: give a number of GPUs"):
        ServeSettings(num_gpus=-1)
    with pytest.raises(ConfigError, match="other Ray actor options have no meaning"):
        ServeSettings(ray_actor_options={"max_restarts": 2})
    with pytest.raises(ConfigError, match="disagree; give one of them"):
        ServeSettings(num_gpus=1, ray_actor_options={"num_gpus": 2}).bundle()


class _Plain(model.Model):
    """A model with no framework: numpy weights."""

    def setup(self):
        self.w = np.ones(3)

    def forward(self, x):
        return np.asarray(x) @ self.w

    def save_weights(self, directory):
        np.save(f"{directory}/w.npy", self.w)

    def load_weights(self, directory):
        self.w = np.load(f"{directory}/w.npy")


def test_the_launcher_imports_the_framework_the_saved_model_uses(tmp_path):
    torch = pytest.importorskip("torch")

    class Lin(model.TorchModel):
        def setup(self):
            self.net = torch.nn.Linear(3, 1)

        def forward(self, x):
            return self.net(x)

    Lin().save(str(tmp_path / "torch"))
    plain = _Plain()
    plain.ensure_setup()
    plain.save(str(tmp_path / "plain"))
    assert serve_imports(str(tmp_path / "torch")) == ("torch",)
    assert serve_imports(str(tmp_path / "plain")) == ()
    assert serve_imports(str(tmp_path / "missing")) == ()
    assert serve_imports("s3://bucket/model") == ()


@pytest.mark.parametrize("base, framework", [("XGBoostModel", "xgboost"),
                                             ("LightGBMModel", "lightgbm")])
def test_a_tree_model_s_replicas_get_its_library_imported_ahead(base, framework, tmp_path):
    pytest.importorskip(framework)
    from tandem.model._files import identity_files

    cls = type("Trees", (getattr(model, base),), {"__module__": "__main__"})  # by value
    for name, data in identity_files(cls()).items():
        (tmp_path / name).write_bytes(data)
    assert serve_imports(str(tmp_path)) == (framework,)
