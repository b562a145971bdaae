"""Issue 21, item 3: ``CometLoggerCallback`` (Ray's ``ray.air.integrations.comet``) in
offline mode with the real ``comet_ml``: each trial's archive is read back."""

from __future__ import annotations

import glob
import json
import zipfile

import pytest

import tandem
from tandem import tune
from tandem.train import RunConfig

comet_ml = pytest.importorskip("comet_ml")
from tandem.air.integrations.comet import CometLoggerCallback

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def trainable(config):
    for i in range(3):
        tune.report({"loss": config["x"] / (i + 1), "nested": {"acc": 0.5 + 0.1 * i}})


def _read(archive):
    with zipfile.ZipFile(archive) as z:
        experiment = json.loads(z.read("experiment.json"))
        lines = z.read("messages.json").decode().splitlines()
    return experiment, [json.loads(line) for line in lines if line.strip()]


def test_offline_archives_hold_params_and_metrics(storage, tmp_path, monkeypatch):
    monkeypatch.setenv("COMET_API_KEY", "offline-only")
    offline = tmp_path / "comet"
    tandem.init(num_cpus=2)
    grid = tune.Tuner(
        trainable, param_space={"x": tune.grid_search([1.0, 2.0])},
        run_config=RunConfig(storage_path=storage, name="comet", verbose=0, callbacks=[
            CometLoggerCallback(online=False, tags=["tandem-test"], project_name="tandem",
                                offline_directory=str(offline))]),
    ).fit()
    assert grid.num_errors == 0
    archives = sorted(glob.glob(str(offline / "*.zip")))
    assert len(archives) == 2
    seen = {}
    for archive in archives:
        experiment, messages = _read(archive)
        assert experiment["tags"] == ["tandem-test"]
        assert experiment["project_name"] == "tandem"
        text = json.dumps(messages)
        params = {}
        metrics = []
        for m in messages:
            payload = m.get("payload", m)
            p = payload.get("param") or payload.get("parameter")
            if isinstance(p, dict) and "paramName" in p:
                params[p["paramName"]] = p.get("paramValue")
            metric = payload.get("metric")
            if isinstance(metric, dict) and metric.get("metricName") == "loss":
                metrics.append((metric.get("step"), float(metric["metricValue"])))
        assert "nested/acc" in text
        x = float(params["x"])
        assert sorted(metrics) == [(1, x), (2, x / 2), (3, x / 3)]
        seen[x] = archive
    assert sorted(seen) == [1.0, 2.0]
