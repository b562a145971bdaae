"""Ray's example programs that use Ray Data, imports swapped to tandem (Ray Data stays Ray's:
tandem takes a ``ray.data.Dataset`` as it is), run as a user runs them. Their program starts
a local Ray instance, so this file runs in the xdist group of the tests that start Ray."""

from __future__ import annotations

import glob
import os

import pytest

from tests.e2e.test_ray_programs import rows, run_program

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.ray_cluster]


def test_tensorflow_autoencoder_example_ray_data_shards_keras_fit(tmp_path):
    """Ray's tensorflow_autoencoder_example.py --smoke-test: a ray.data.Dataset (scikit-learn's
    digits instead of the MNIST download) split across 2 workers in one
    MultiWorkerMirroredStrategy, read with iter_tf_batches, one Keras fit per epoch with
    ReportCheckpointCallback: 4 reports, the loss falls, a checkpoint per report."""
    import importlib.util

    if importlib.util.find_spec("tf_keras") is None or importlib.util.find_spec("ray") is None:
        pytest.skip("needs the tensorflow and ray extras and tf-keras")
    out = run_program("tensorflow_autoencoder_example.py", tmp_path, "--smoke-test",
                      env_extra={"HOME": str(tmp_path)})
    assert "Result(metrics={'loss':" in out and "'binary_crossentropy':" in out
    (run,) = glob.glob(str(tmp_path / "results" / "*" / "result.json"))
    reports = rows(run)
    assert [r["training_iteration"] for r in reports] == [1, 2, 3, 4]
    assert reports[-1]["loss"] < reports[0]["loss"]
    ckpts = sorted(glob.glob(os.path.join(os.path.dirname(run), "checkpoint_*", "model.keras")))
    assert len(ckpts) >= 1
