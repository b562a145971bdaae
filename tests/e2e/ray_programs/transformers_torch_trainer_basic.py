# Ported from Ray's python/ray/train/examples/transformers/transformers_torch_trainer_basic.py
# (Apache-2.0, ray-project/ray): Ray's text with the imports swapped to tandem and the sizes
# shrunk for a 2-core machine. Nothing is downloaded here, so the stand-ins below replace
# what the program loads from the Hub: "yelp_review_full" is generated text with 5 labels,
# "bert-base-cased" is a 2-layer BERT built from a config with a word-level tokenizer over
# that text's words, and the "accuracy" metric is computed with numpy. `evaluation_strategy`
# is `eval_strategy` in transformers >= 4.46 (the library renamed it).
import numpy as np

# Minimal Example adapted from https://huggingface.co/docs/transformers/training
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    Trainer,
    TrainingArguments,
)

from tandem.train import ScalingConfig
from tandem.train.huggingface.transformers import RayTrainReportCallback, prepare_trainer
from tandem.train.torch import TorchTrainer

# -- stand-ins for the downloads (not in Ray's program) -----------------------------------
WORDS = ["good", "bad", "great", "awful", "fine", "okay", "meh", "superb", "poor", "nice"]


def load_dataset(name):
    import datasets

    rng = np.random.default_rng(0)

    def split(n):
        labels = rng.integers(0, 5, n)
        text = [" ".join([WORDS[2 * label], *rng.choice(WORDS, 5)]) for label in labels]
        return datasets.Dataset.from_dict({"text": text, "label": labels.tolist()})

    return datasets.DatasetDict(train=split(96), test=split(32))


class AutoTokenizer:  # shadows the import: no tokenizer download
    @staticmethod
    def from_pretrained(name):
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast

        vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", *WORDS])}
        tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]",
                                       unk_token="[UNK]", model_max_length=8)


class AutoModelForSequenceClassification:  # shadows the import: no weights download
    @staticmethod
    def from_pretrained(name, num_labels):
        import transformers

        config = transformers.BertConfig(
            vocab_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=16, num_labels=num_labels)
        return transformers.AutoModelForSequenceClassification.from_config(config)


class evaluate:
    @staticmethod
    def load(name):
        class Accuracy:
            def compute(self, predictions, references):
                return {"accuracy": float(np.mean(predictions == references))}

        return Accuracy()
# -----------------------------------------------------------------------------------------


# [1] Define a training function that includes all your training logic
# ====================================================================
def train_func(config):
    # Datasets
    dataset = load_dataset("yelp_review_full")
    tokenizer = AutoTokenizer.from_pretrained("bert-base-cased")

    def tokenize_function(examples):
        return tokenizer(examples["text"], padding="max_length", truncation=True)

    tokenized_ds = dataset.map(tokenize_function, batched=True)

    small_train_ds = tokenized_ds["train"].shuffle(seed=42).select(range(96))
    small_eval_ds = tokenized_ds["test"].shuffle(seed=42).select(range(32))

    # Model
    model = AutoModelForSequenceClassification.from_pretrained(
        "bert-base-cased", num_labels=5
    )

    # Evaluation metrics
    metric = evaluate.load("accuracy")

    def compute_metrics(eval_pred):
        logits, labels = eval_pred
        predictions = np.argmax(logits, axis=-1)
        return metric.compute(predictions=predictions, references=labels)

    # Hugging Face Trainer
    training_args = TrainingArguments(
        output_dir="test_trainer", eval_strategy="epoch", report_to="none",
        save_strategy="epoch", num_train_epochs=2,
    )

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=small_train_ds,
        eval_dataset=small_eval_ds,
        compute_metrics=compute_metrics,
    )

    # [2] Report metrics and checkpoints to Ray Train
    # ===============================================
    trainer.add_callback(RayTrainReportCallback())

    # [3] Prepare your trainer for Ray Data integration
    # =================================================
    trainer = prepare_trainer(trainer)

    # Start Training
    trainer.train()


# [4] Build a Ray TorchTrainer to launch `train_func` on all workers
# ==================================================================
trainer = TorchTrainer(
    train_func, scaling_config=ScalingConfig(num_workers=2, use_gpu=False)
)

result = trainer.fit()
print("eval_accuracy" in result.metrics, "epoch:", result.metrics["epoch"])
print("checkpoint files:", sorted(__import__("os").listdir(result.checkpoint.path)))
