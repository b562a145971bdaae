"""Ray constructor parameters tandem gained when the compatibility table started walking the
parameters of every public class and function (issue 21, item 1): each does what Ray's does."""

from __future__ import annotations

import os

import pandas as pd
import pyarrow.fs as pafs
import pytest

from tandem._core.errors import ConfigError


def test_checkpoint_and_result_take_rays_filesystem_and_dataframe(tmp_path):
    from tandem.train import Checkpoint, Result
    from tandem.train.torch import TorchCheckpoint

    sub = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    (tmp_path / "ckpt").mkdir()
    ckpt = Checkpoint("ckpt", filesystem=sub)
    assert ckpt.path == os.path.join(str(tmp_path), "ckpt")
    assert isinstance(ckpt.filesystem, pafs.LocalFileSystem)
    assert TorchCheckpoint("ckpt", filesystem=sub).path == ckpt.path
    frame = pd.DataFrame([{"loss": 1.0}])
    result = Result(metrics={"loss": 1.0}, checkpoint=ckpt, path=str(tmp_path),
                    metrics_dataframe=frame)
    assert result.metrics_dataframe is frame and result.best_checkpoints == []


def test_trainable_storage_sets_its_logdir(tmp_path):
    from tandem.train import StorageContext
    from tandem.tune import Trainable

    class T(Trainable):
        def step(self):
            return {"x": 1}

    t = T({"a": 1}, StorageContext(storage_path=str(tmp_path), run_name="run"))
    assert t.logdir == str(tmp_path) + "/run"
    with pytest.raises(ConfigError, match="StorageContext"):
        T({}, storage="somewhere")


def test_xgboost_config_communicator():
    from tandem.train.xgboost import XGBoostConfig, XGBoostTrainer

    assert XGBoostConfig().xgboost_communicator == "rabit"
    with pytest.raises(ValueError, match="only \"rabit\""):
        XGBoostConfig(xgboost_communicator="federated")
    trainer = XGBoostTrainer(lambda: None, xgboost_config=XGBoostConfig(timeout_s=7))
    assert trainer.backend_config.timeout_s == 7

    from tandem.train.lightgbm import LightGBMConfig, LightGBMTrainer

    trainer = LightGBMTrainer(lambda: None, lightgbm_config=LightGBMConfig(timeout_s=5))
    assert trainer.backend_config.timeout_s == 5  # Ray's keyword, in the signature


def test_boosted_tree_trainers_show_rays_signature_from_one_init():
    """One ``__init__`` (the shared base's) serves both trainers; each shows and accepts
    Ray's signature with its own config keyword, and refuses the other's."""
    import inspect

    from tandem.train.lightgbm import LightGBMConfig, LightGBMTrainer
    from tandem.train.xgboost import XGBoostConfig, XGBoostTrainer

    ray_order = ["train_loop_per_worker", "train_loop_config", "{}", "scaling_config",
                 "run_config", "datasets", "dataset_config", "validation_config", "metadata",
                 "resume_from_checkpoint", "label_column", "params", "num_boost_round",
                 "backend_config"]
    for cls, keyword, config_cls, other in (
            (XGBoostTrainer, "xgboost_config", XGBoostConfig, "lightgbm_config"),
            (LightGBMTrainer, "lightgbm_config", LightGBMConfig, "xgboost_config")):
        assert "__init__" not in vars(cls)
        sig = inspect.signature(cls)
        assert list(sig.parameters) == [n.format(keyword) for n in ray_order]
        assert sig.parameters[keyword].kind is inspect.Parameter.KEYWORD_ONLY
        assert sig.parameters[keyword].default is None
        assert config_cls.__name__ in str(sig.parameters[keyword].annotation)
        with pytest.raises(TypeError, match=f"unexpected keyword argument '{other}'"):
            cls(lambda: None, **{other: config_cls()})
        with pytest.raises(ConfigError, match=f"{keyword}=.*takes a {config_cls.__name__}"):
            cls(lambda: None, **{keyword: object()})
        # the older spelling still works, and the library's keyword does not override it
        given = config_cls(timeout_s=3)
        assert cls(lambda: None, backend_config=given).backend_config is given
        assert cls(lambda: None, backend_config=given,
                   **{keyword: config_cls(timeout_s=4)}).backend_config is given


def test_optuna_search_study_name_storage_and_evaluated_rewards(tmp_path):
    import optuna

    from tandem import tune
    from tandem.tune.search.optuna import OptunaSearch

    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/optuna.db")
    searcher = OptunaSearch(points_to_evaluate=[{"x": 1.0}, {"x": 2.0}],
                            evaluated_rewards=[0.5, 0.25], study_name="mine", storage=storage,
                            metric="loss", mode="min", seed=0)
    searcher.set_search_properties("loss", "min", {"x": tune.uniform(0, 3)})
    config = searcher.suggest("t1")
    assert 0 <= config["x"] <= 3
    study = optuna.load_study(study_name="mine", storage=storage)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert sorted((t.params["x"], t.value) for t in done) == [(1.0, 0.5), (2.0, 0.25)]
    with pytest.raises(ConfigError, match="2 rewards for 1 points"):
        OptunaSearch(points_to_evaluate=[{"x": 1.0}], evaluated_rewards=[1, 2])
    with pytest.raises(ConfigError, match="BaseStorage"):
        OptunaSearch(storage="sqlite:///x.db")


def test_train_context_kinds_outside_a_worker():
    from tandem import train
    from tandem.train.v2.api.context import DistributedTrainContext, LocalTrainContext

    ctx = train.get_context()
    assert isinstance(ctx, LocalTrainContext) and isinstance(ctx, train.TrainContext)
    assert (ctx.get_world_size(), ctx.get_world_rank()) == (1, 0)
    with pytest.raises(NotImplementedError, match="Local storage context"):
        ctx.get_storage()
    local = LocalTrainContext("exp", world_size=4, world_rank=2)
    assert (local.get_experiment_name(), local.get_world_size(), local.get_world_rank()) == (
        "exp", 4, 2)
    assert issubclass(DistributedTrainContext, train.TrainContext)


def test_trainable_train_fills_rays_auto_keys(tmp_path):
    from tandem.tune import Trainable

    class Steps(Trainable):
        def step(self):
            return {"score": self.iteration, "timesteps_this_iter": 10,
                    "time_this_iter_s": 0.5}

        def save_checkpoint(self, checkpoint_dir):
            return {"score": self.iteration}

        def load_checkpoint(self, checkpoint):
            pass

    t = Steps({"a": 1})
    first, second = t.train(), t.train()
    assert second["training_iteration"] == 2 and second["done"] is False
    assert second["time_total_s"] == 1.0 and second["time_this_iter_s"] == 0.5
    assert second["timesteps_total"] == 20 and second["iterations_since_restore"] == 2
    assert second["pid"] == os.getpid() and second["config"] == {"a": 1}
    assert second["trial_id"] == "default"
    assert {"date", "timestamp", "hostname", "node_ip", "time_since_restore"} <= set(first)
    path = t.save(str(tmp_path / "ckpt"))
    again = Steps({"a": 1})
    again.restore(path)
    third = again.train()
    assert (third["training_iteration"], third["time_total_s"]) == (3, 1.5)
    assert third["iterations_since_restore"] == 1  # counted from the restore, as Ray


def test_params_form_boosted_trainer_refuses_validation_config():
    from tandem.train import ValidationConfig
    from tandem.train.xgboost import XGBoostTrainer

    with pytest.raises(ConfigError, match="params form's own loop"):
        XGBoostTrainer(params={"objective": "reg:squarederror"},
                       validation_config=ValidationConfig(fn=lambda checkpoint: {}))
