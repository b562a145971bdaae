"""Bad input to model.train / model.tune is refused on the driver, before any worker starts."""

from __future__ import annotations

import io
import itertools
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest
import torch

from tandem import model
from tandem._core.errors import ConfigError
from tandem.model import _data
from tandem.tune import loguniform


class Tiny(model.TorchModel):
    default_config: ClassVar[dict] = {"lr": 0.01, "hidden": 4, "opt": {"momentum": 0.9}}

    def setup(self):
        self.net = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.forward(x), y)


XY = (np.zeros((10, 3), np.float32), np.zeros(10, np.int64))


def test_settings_from_dict_names_unknown_keys():
    s = model.TrainSettings.from_any({"num_workers": 3, "use_gpu": False, "num_epochs": 10,
                                      "batch_size": 10})
    assert (s.num_workers, s.num_epochs, s.batch_size) == (3, 10, 10)
    with pytest.raises(ConfigError) as e:
        model.TrainSettings.from_any({"num_worker": 2, "epochs": 3})
    msg = str(e.value)
    assert "'num_worker', 'epochs'" in msg and "num_workers" in msg and "num_epochs" in msg
    with pytest.raises(ConfigError, match="Allowed keys: num_samples, metric"):
        model.TuneSettings.from_any({"samples": 3})
    with pytest.raises(ConfigError, match="must be a dict or a tandem.model.TrainSettings"):
        model.TrainSettings.from_any([1])


@pytest.mark.parametrize("kwargs, match", [
    ({"num_workers": 0}, r"num_workers=0\): must be a whole number of at least 1"),
    ({"batch_size": 2.5}, r"batch_size=2.5"),
    ({"precision": "8"}, r"precision='8'\): allowed are '32', 'bf16', '16'"),
    ({"max_failures": -2}, r"max_failures=-2"),
    ({"on_nonfinite_loss": "ignore"}, r"'raise' and 'skip'"),
])
def test_bad_setting_values(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        model.TrainSettings(**kwargs)


def test_precision_aliases():
    assert model.TrainSettings(precision="bf16-mixed").precision == "bf16"
    assert model.TrainSettings(precision=16).precision == "16"  # type: ignore[arg-type]


def test_unknown_settings_key_refused_by_train():
    with pytest.raises(ConfigError, match="unknown key 'gpus'.*Allowed keys: num_workers"):
        model.train(Tiny, dataset={"train": XY}, train_settings={"gpus": 1})


@pytest.mark.parametrize("dataset, match", [
    (None, r"model.train needs data"),
    ({"valid": XY}, r"has no 'train' data \(keys given: \['valid'\]\)"),
    ({"train": XY, "test": XY}, r"unknown key 'test'.*'train' \(required\) and 'valid'"),
    ({"train": (np.zeros((10, 3)), np.zeros(9))}, r"dataset\['train'\]: X has 10 rows but y has 9"),
    ({"train": XY, "valid": (np.zeros((4, 3)), np.zeros(5))}, r"dataset\['valid'\]: X has 4"),
    ({"train": pd.DataFrame({"a": [1.0, 2.0], "y": [0, 1]})}, r"label_column"),
    ({"train": {"x": [1, 2]}}, r"dataset\['train'\] is a builtins.dict"),
    ({"train": (np.zeros((1, 3)), np.zeros(1))}, r"has 1 rows, fewer than num_workers=2"),
    ([1, 2], r"dataset must be a dict"),
])
def test_bad_data_is_named(dataset, match):
    with pytest.raises(ConfigError, match=match):
        model.train(Tiny, dataset=dataset, train_settings={"num_workers": 2})


def test_dataframe_label_column_must_exist():
    df = pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0], "target": [0, 1]})
    with pytest.raises(model.DataError, match=r"label_column 'label' is not a column.*\['a', 'b', 'target'\]"):
        model.train(Tiny, dataset={"train": df}, train_settings={"label_column": "label"})
    bad = df.assign(city=["x", "y"])
    with pytest.raises(model.DataError, match=r"\['city'\] is not numeric"):
        model.train(Tiny, dataset={"train": bad}, train_settings={"label_column": "target"})


def test_data_class_without_setup():
    class NoSetup:
        pass

    with pytest.raises(model.DataError, match="needs a setup\\(\\) method"):
        model.train(Tiny, dataset=NoSetup)


def test_model_definition_errors_before_start():
    class NoStep(model.TorchModel):
        def setup(self):
            self.net = torch.nn.Linear(3, 2)

        def forward(self, x):
            return self.net(x)

    class NoForward(model.TorchModel):
        def setup(self):
            self.net = torch.nn.Linear(3, 2)

    with pytest.raises(model.ModelDefinitionError, match="NoStep does not define training_step"):
        model.train(NoStep, dataset={"train": XY})
    with pytest.raises(model.ModelDefinitionError, match=r"NoForward does not define forward\(\)"):
        model.train(NoForward, dataset={"train": XY})
    with pytest.raises(model.ModelDefinitionError, match="has no training loop"):
        model.Model.trainer_class()
    with pytest.raises(ConfigError, match="takes a Model subclass"):
        model.train(object(), dataset={"train": XY})


def test_hyperparameter_space_names_unknown_keys():
    class Spacey(Tiny):
        @classmethod
        def hyperparameter_space(cls):
            return {"lr": loguniform(1e-3, 1e-1), "dropout": [0.1], "opt": {"beta": 1}}

    with pytest.raises(ConfigError) as e:
        model.tune(Spacey, dataset={"train": XY})
    msg = str(e.value)
    assert "['dropout', 'opt.beta']" in msg and "Spacey.hyperparameter_space()" in msg
    assert "['hidden', 'lr', 'opt']" in msg
    with pytest.raises(ConfigError, match="param_space is empty"):
        model.tune(Tiny, dataset={"train": XY}, param_space={})
    with pytest.raises(ConfigError, match=r"Tiny.hyperparameter_space\(\) is empty"):
        model.tune(Tiny, dataset={"train": XY})


def test_even_and_strided_shards():
    data = _data.Arrays(np.arange(11), np.arange(11) * 10)
    even = [_data.even_shard(data, r, 3) for r in range(3)]
    assert [s.x.tolist() for s in even] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    strided = [_data.strided_shard(data, r, 3) for r in range(3)]
    assert sorted(itertools.chain.from_iterable(s.x.tolist() for s in strided)) == list(range(11))
    assert strided[1].y.tolist() == [10, 40, 70, 100]


def test_worker_data_batches_reshuffle_per_epoch():
    splits = {"train": _data.Arrays(np.arange(8, dtype=np.float64)[:, None], np.arange(8))}
    wd = _data.WorkerData(splits, rank=0, world=1, batch_size=3, seed=7, shuffle=True,
                          per_rank={"train"})
    e1 = [b[1].tolist() for b in wd.train_batches(1)]
    e2 = [b[1].tolist() for b in wd.train_batches(2)]
    assert [len(b) for b in e1] == [3, 3, 2] and sorted(itertools.chain.from_iterable(e1)) == list(range(8))
    assert e1 != e2  # a new order every epoch
    assert e1 == [b[1].tolist() for b in wd.train_batches(1)]  # and the same order on a resume
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(7 + 1)).tolist()
    assert list(itertools.chain.from_iterable(e1)) == perm  # the documented order
    x, _ = next(wd.train_batches(1))
    assert x.dtype == torch.float32  # float64 features become float32


def test_split_output_errors():
    from tandem.model._loop import split_output

    m = Tiny()
    m.ensure_setup()
    w = torch.nn.Parameter(torch.ones(1))
    with pytest.raises(model.ModelDefinitionError, match="returned float 0.5 at epoch 2, batch 3"):
        split_output(m, 0.5, 2, 3)
    with pytest.raises(model.ModelDefinitionError, match="without 'loss'.*'acc'"):
        split_output(m, {"acc": 1}, 1, 0)
    with pytest.raises(model.ModelDefinitionError, match=r"shape \(2,\)"):
        split_output(m, w.repeat(2), 1, 0)
    with pytest.raises(model.ModelDefinitionError, match="does not require grad"):
        split_output(m, torch.tensor(1.0), 1, 0)
    _, extra = split_output(m, {"loss": w.sum(), "acc": 0.5}, 1, 0)
    assert extra == {"acc": 0.5}


def test_progress_plain_lines_and_live_line():
    from tandem.train.progress import RunProgress

    out = io.StringIO()
    p = RunProgress("run1", "/tmp/x/run1", num_workers=2, total=3, key="epoch", tty=False, out=out)
    p.start()
    p.on_report({"epoch": 1, "loss": 0.5, "val_accuracy": 0.912345, "samples_per_s": 12345.6,
                 "training_iteration": 1})
    p.end("FINISHED")
    lines = out.getvalue().splitlines()
    assert lines[0] == "tandem: run run1 started on 2 workers; results in /tmp/x/run1"
    assert lines[1].startswith("[run1] epoch 1/3 loss=0.5 val_accuracy=0.9123 samples_per_s=12346 (")
    assert "training_iteration" not in lines[1]
    assert lines[2].startswith("tandem: run run1 finished after") and "Results: /tmp/x/run1" in lines[2]

    live = io.StringIO()
    p = RunProgress("run2", "/r", total=None, key=None, tty=True, out=live)
    p.start()
    p.on_report({"loss": 1.25})
    p.end("FAILED")
    text = live.getvalue()
    assert "report 1" in text and "loss=1.25" in text and "run run2 failed" in text


@pytest.mark.parametrize("precision, dtype", [("bf16", torch.bfloat16), ("16", torch.float16),
                                              ("32", torch.float32)])
def test_precision_autocast_and_scaler_on_cpu(precision, dtype):
    from tandem.model._loop import _Precision

    p = _Precision(precision, torch.device("cpu"))
    torch.manual_seed(0)  # small activations: the scaled fp16 gradients stay finite
    net = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    before = net.weight.detach().clone()
    with p.autocast():
        out = net(torch.full((3, 4), 0.01))
        loss = out.float().pow(2).mean()
    assert out.dtype == dtype
    assert (p.scaler is not None) == (precision == "16")
    if p.scaler is not None:
        p.scaler.scale(loss).backward()
        p.scaler.step(opt)
        p.scaler.update()
    else:
        loss.backward()
        opt.step()
    assert not torch.equal(before, net.weight)  # it stepped


def test_resume_restores_optimizer_state_and_takes_new_hyperparameters(tmp_path):
    """After a restart the optimizer continues; from a donor's checkpoint with another
    config (PBT) its state is kept but the new config's lr applies."""
    from tandem.model._loop import WorkerPayload, _Precision, _resume, _write_checkpoint
    from tandem.train import Checkpoint

    class M(Tiny):
        def configure_optimizers(self):
            return torch.optim.SGD(self.net.parameters(), lr=self.config["lr"], momentum=0.9)

    cpu = torch.device("cpu")
    donor = M({"lr": 0.1})
    donor.ensure_setup()
    opt = donor.configure_optimizers()
    donor.net(torch.ones(2, 3)).sum().backward()
    opt.step()
    payload = WorkerPayload(model_cls=M, settings=model.TrainSettings(num_epochs=5), seed=1)
    _write_checkpoint(str(tmp_path), donor, {}, opt, None, _Precision("32", cpu), 2, payload)
    ckpt = Checkpoint.from_directory(tmp_path)

    same = M({"lr": 0.1})
    same.ensure_setup()
    opt2 = same.configure_optimizers()
    assert _resume(ckpt, same, opt2, None, _Precision("32", cpu), cpu) == 2
    assert torch.equal(same.net.weight, donor.net.weight)
    buf = opt2.state[same.net.weight]["momentum_buffer"]
    assert torch.equal(buf, opt.state[donor.net.weight]["momentum_buffer"])

    mutated = M({"lr": 0.02})
    mutated.ensure_setup()
    opt3 = mutated.configure_optimizers()
    _resume(ckpt, mutated, opt3, None, _Precision("32", cpu), cpu)
    assert opt3.param_groups[0]["lr"] == 0.02  # the new config's lr, not the donor's 0.1
    assert "momentum_buffer" in opt3.state[mutated.net.weight]


def test_arrays_reach_the_trainer_once_and_the_train_layer_splits_them_by_rank():
    from tandem.train import DataConfig
    from tandem.train._internal.data import split

    x, y = np.arange(22).reshape(11, 2), np.arange(11) * 10
    ds = torch.utils.data.TensorDataset(torch.zeros(5, 2))
    data = _data.TrainerData.of({"train": _data.Arrays(x, y), "valid": ds})
    assert set(data.datasets) == {"train"} and data.payload_splits == {"valid": ds}
    assert data.config == DataConfig(datasets_to_split=["train"])
    whole = _data.Arrays(x, y)
    parts = split("train", whole, 3)  # what the controller hands each rank
    for r, part in enumerate(parts):
        even = _data.even_shard(whole, r, 3)
        assert isinstance(part, _data.Arrays)
        assert part.x.tolist() == even.x.tolist() and part.y.tolist() == even.y.tolist()
    # validation arrays go whole (not split, so no row is dropped); each rank strides them
    data = _data.TrainerData.of({"train": whole, "valid": _data.Arrays(x[:5], y[:5])})
    assert data.to_split == ("train",) and set(data.datasets) == {"train", "valid"}
    row_x, row_y = whole[2]
    assert row_x.tolist() == [4, 5] and row_y == 20
    with pytest.raises(IndexError):
        whole[11]


def test_a_set_up_torch_model_hands_over_its_weights_in_memory():
    a, b = Tiny(), Tiny()
    a.ensure_setup()
    with torch.no_grad():
        for p in a.parameters():
            p.add_(1.0)
    b.load_weights_state(a.weights_state())
    x = np.ones((2, 3), dtype=np.float32)
    assert torch.equal(a.predict(x), b.predict(x))
    with pytest.raises(ConfigError, match=r"Tiny.load_weights_state\(state\): the weights hold "
                                          r"modules \['other'\]"):
        b.load_weights_state({"other": {}})
