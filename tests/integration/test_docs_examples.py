"""The README's code blocks and the examples run as written (an example in the docs is a test)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.timeout(400)


def python_blocks(path: str) -> list[str]:
    text = open(path).read()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def run(args: list[str], tmp_path, timeout: int = 300) -> str:
    env = {**os.environ, "TANDEM_STORAGE_PATH": str(tmp_path / "results"),
           "TANDEM_MODELS_PATH": str(tmp_path / "models")}
    proc = subprocess.run([sys.executable, *args], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.parametrize("index", range(len(python_blocks(os.path.join(ROOT, "README.md")))))
def test_readme_python_blocks_run(index, tmp_path):
    code = python_blocks(os.path.join(ROOT, "README.md"))[index]
    script = tmp_path / "snippet.py"
    script.write_text(code)
    run([str(script)], tmp_path)


EXTENDING = os.path.join(ROOT, "docs", "extending.md")


def test_extending_doc_blocks_run_as_one_script(tmp_path):
    """docs/extending.md: submit a RunDescription, follow it, define a callback (the
    blocks build on each other, so they run as one script; the callback is then used)."""
    code = "\n".join(python_blocks(EXTENDING)) + (
        "\nfrom dataclasses import replace\n"
        "run = replace(run, run_config=replace(run.run_config, name='with-callback',\n"
        "              callbacks=[PrintLoss()]))\n"
        "train.submit(run).wait()\n"
    )
    script = tmp_path / "extending.py"
    script.write_text(code)
    out = run([str(script)], tmp_path)
    assert "[0, 1, 2]" in out
    assert "with-callback starts; this callback runs in the driver" in out
    assert "done: {'epoch': 2, 'rows': 50}" in out


def test_train_digits_example(tmp_path):
    out = run([os.path.join(ROOT, "examples", "train_digits.py"), "--epochs", "3"], tmp_path)
    acc = float(re.search(r"final accuracy: ([0-9.]+)", out).group(1))
    assert acc > 0.8
    assert "results and checkpoints:" in out


def test_quickstart_sweep(tmp_path):
    out = run([os.path.join(ROOT, "examples", "quickstart.py"), "--samples", "3", "--epochs", "3"],
              tmp_path)
    assert "best config:" in out and "best accuracy:" in out
    assert out.count("RUNNING") >= 3


def test_model_docs_run(tmp_path):
    """docs/model.md's python blocks, in order, as one script (later blocks use earlier ones)."""
    code = "\n".join(python_blocks(os.path.join(ROOT, "docs", "model.md")))
    script = tmp_path / "model_doc.py"
    script.write_text(code)
    out = run([str(script)], tmp_path)
    assert "DigitsMLP True" in out


def test_model_quickstart_example(tmp_path):
    out = run([os.path.join(ROOT, "examples", "model_quickstart.py"), "--epochs", "3",
               "--samples", "3"], tmp_path)
    acc = re.search(r"val_accuracy ([0-9.]+), predict\(\) accuracy ([0-9.]+)", out)
    assert acc and acc.group(1) == acc.group(2)
    assert "best config:" in out and "best model predicts:" in out
    assert "epoch 3/3" in out  # the progress, one line per epoch when piped
    served = re.search(r"registered (digits@\d+); served at (http://\S+): (\[.*\])", out)
    assert served and served.group(1) == "digits@1", out[-2000:]
    best = re.search(r"best model predicts: (\[.*?\])", out)
    assert best and served.group(3) == best.group(1)  # the server answers as the model does


def test_tracking_docs_run(tmp_path):
    """docs/tracking.md's python blocks, in order, as one script: MLflow into a SQLite file in
    the script's folder, W&B offline (no account)."""
    code = "\n".join(python_blocks(os.path.join(ROOT, "docs", "tracking.md")))
    script = tmp_path / "tracking_doc.py"
    script.write_text(code)
    out = run([str(script)], tmp_path)
    lines = [line for line in out.splitlines() if " lr " in line]
    assert len(lines) == 3 and all("FINISHED" in line for line in lines), out[-2000:]
    assert "1 MLflow run from 2 workers: {'lr': '0.1'} FINISHED" in out
    import glob

    runs = glob.glob(str(tmp_path / "results" / "tracked" / "*" / "wandb" / "offline-run-*"))
    assert len(runs) == 3  # one W&B run per trial, in its trial folder


def test_tune_search_docs_run(tmp_path):
    """docs/tune_search.md's python blocks, in order, as one script: HyperOpt under a
    ConcurrencyLimiter, then a two-objective Optuna search."""
    code = "\n".join(python_blocks(os.path.join(ROOT, "docs", "tune_search.md")))
    script = tmp_path / "tune_search_doc.py"
    script.write_text(code)
    out = run([str(script)], tmp_path)
    assert "'x':" in out and "trials on the Pareto front" in out, out[-2000:]


@pytest.mark.slow
def test_integrations_doc_lightning_block(tmp_path):
    """docs/integrations.md: the Lightning example runs as written (2 workers)."""
    pytest.importorskip("lightning")
    code = python_blocks(os.path.join(ROOT, "docs", "integrations.md"))[0]
    script = tmp_path / "integrations.py"
    script.write_text(code)
    out = run([str(script)], tmp_path)
    assert "1 ['checkpoint.ckpt']" in out


@pytest.mark.slow
def test_backends_doc_tensorflow_block_runs(tmp_path):
    """docs/backends.md's TensorflowTrainer block, as written (2 workers, Keras fit)."""
    import importlib.util

    if importlib.util.find_spec("tf_keras") is None:
        pytest.skip("needs the tensorflow extra and tf-keras")
    (code,) = python_blocks(os.path.join(ROOT, "docs", "backends.md"))
    script = tmp_path / "backends_tf.py"
    script.write_text(code)
    assert "loss after 2 epochs:" in run([str(script)], tmp_path)


@pytest.mark.slow
def test_tune_resources_doc_runs(tmp_path):
    """docs/tune_resources.md: the ResourceChangingScheduler example runs as written and the
    long trial ends holding all 4 CPUs."""
    code = "\n".join(python_blocks(os.path.join(ROOT, "docs", "tune_resources.md")))
    script = tmp_path / "tune_resources_doc.py"
    script.write_text(code)
    out = run([str(script)], tmp_path)
    assert "long trial ended with 4.0 CPUs" in out, out[-2000:]


def test_warm_workers_doc_runs(tmp_path):
    """docs/warm_workers.md's python block: the pool's bounds given to tandem.init."""
    code = "\n".join(python_blocks(os.path.join(ROOT, "docs", "warm_workers.md")))
    code += ("\nfrom tandem.jobs import runtime\n"
             "assert runtime.current_service() is None\n"
             "print('warm pool bounds accepted')\n")
    script = tmp_path / "warm_doc.py"
    script.write_text(code)
    assert "warm pool bounds accepted" in run([str(script)], tmp_path)


WARM_HOST_TRAIN = """
import sys
import tandem.train as train
from tandem.train import ScalingConfig
from tandem.train.torch import TorchTrainer

def loop(config):
    import psutil
    train.report({"zygote_parent": psutil.Process().parent().ppid()})

result = TorchTrainer(loop, scaling_config=ScalingConfig(num_workers=2)).fit()
print("zygote's parent", result.metrics["zygote_parent"])
"""


@pytest.mark.slow
def test_warm_host_doc_commands_run(tmp_path):
    """docs/warm_workers.md's warm host commands, as written (``train.py``: a 2-worker fit
    that tells whose child its workers' zygote is)."""
    import shlex

    text = open(os.path.join(ROOT, "docs", "warm_workers.md")).read()
    (block,) = re.findall(r"```bash\n(.*?)```", text, re.S)
    (tmp_path / "train.py").write_text(WARM_HOST_TRAIN)
    env = {**os.environ, "TANDEM_WARM_DIR": str(tmp_path / "warm"),
           "TANDEM_STORAGE_PATH": str(tmp_path / "results"),
           "PYTHONPATH": os.path.join(ROOT, "src")}
    outs = []
    try:
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            exe = {"tandem": [sys.executable, "-m", "tandem.cli"], "python": [sys.executable]}
            proc = subprocess.run([*exe[words[0]], *words[1:]], cwd=str(tmp_path), env=env,
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
            outs.append(proc.stdout)
    finally:
        subprocess.run([sys.executable, "-m", "tandem.cli", "warm", "stop"], env=env,
                       capture_output=True, timeout=120)
    start, fit, status, stop = outs
    pid = int(re.search(r"warm host pid (\d+)", start).group(1))
    assert f"zygote's parent {pid}" in fit  # the workers forked through the host
    assert f"warm host pid {pid}" in status and "torch" in status
    assert f"stopped the warm host pid {pid}" in stop
