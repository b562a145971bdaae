"""Issue 21, item 4: ``tandem.train.huggingface.transformers`` with a real
``transformers.Trainer`` on 2 workers: a tiny GPT-2 built from a config (no downloads),
trained on generated tokens; ``RayTrainReportCallback`` reports each saved checkpoint."""

from __future__ import annotations

import json
import os

import pytest

import tandem
from tandem.train import RunConfig, ScalingConfig
from tandem.train.torch import TorchTrainer

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")
torch = pytest.importorskip("torch")
from tandem.train.huggingface.transformers import (
    RayTrainReportCallback,
    prepare_trainer,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

VOCAB, SEQ = 16, 8


class Tokens(torch.utils.data.Dataset):
    """Sequences counting up modulo VOCAB: next-token prediction a tiny model learns."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.starts = torch.randint(0, VOCAB, (n,), generator=g)

    def __len__(self):
        return len(self.starts)

    def __getitem__(self, i):
        ids = (self.starts[i] + torch.arange(SEQ)) % VOCAB
        return {"input_ids": ids, "labels": ids.clone()}


def train_func(config):
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from tandem import train

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=32,
                                       n_layer=2, n_head=2))
    args = TrainingArguments(
        output_dir=config["out"] + "/hf", eval_strategy="epoch", save_strategy="epoch",
        logging_strategy="epoch", num_train_epochs=2, per_device_train_batch_size=8,
        per_device_eval_batch_size=8, learning_rate=5e-3, report_to="none", use_cpu=True,
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=Tokens(64, 0),
                      eval_dataset=Tokens(16, 1))
    trainer.add_callback(RayTrainReportCallback())
    trainer = prepare_trainer(trainer)
    trainer.train()
    ctx = train.get_context()
    with open(os.path.join(config["out"], f"rank{ctx.get_world_rank()}.json"), "w") as f:
        json.dump({"world": trainer.args.world_size, "steps": trainer.state.global_step,
                   "class": type(trainer).__name__,
                   "w": sum(p.sum().item() for p in model.parameters())}, f)


def test_transformers_trainer_on_two_workers(storage, tmp_path):
    tandem.init(num_cpus=2)
    result = TorchTrainer(
        train_func, train_loop_config={"out": str(tmp_path)},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name="hf", verbose=0),
    ).fit()
    assert result.error is None
    df = result.metrics_dataframe
    # one report per saved checkpoint (save_strategy="epoch"), with the log history merged
    assert list(df["epoch"]) == [1.0, 2.0]
    assert df["eval_loss"].iloc[-1] < df["eval_loss"].iloc[0]
    assert "loss" in df.columns or "train_loss" in df.columns
    with result.checkpoint.as_directory() as d:
        saved = os.path.join(d, RayTrainReportCallback.CHECKPOINT_NAME)
        assert os.path.exists(os.path.join(saved, "trainer_state.json"))
        model = transformers.GPT2LMHeadModel.from_pretrained(saved)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    # 64 rows split over 2 ranks, batch 8: 4 steps per epoch, 2 epochs
    assert [r["world"] for r in ranks] == [2, 2] and [r["steps"] for r in ranks] == [8, 8]
    assert ranks[0]["class"] == "RayTransformersTrainer"
    # DDP kept both ranks' weights equal, and the checkpoint holds them
    assert ranks[0]["w"] == pytest.approx(ranks[1]["w"], rel=1e-5)
    assert sum(p.sum().item() for p in model.parameters()) == pytest.approx(ranks[0]["w"],
                                                                             rel=1e-5)
