"""Issue 21, item 3: Ray's progress reporters accepted by ``tune.run(progress_reporter=...)``:
``CLIReporter`` prints Ray's status block and table; a ``ProgressReporter`` subclass gets
``should_report`` / ``report`` calls, the last one with ``done=True``."""

from __future__ import annotations

import pytest

import tandem
from tandem import tune

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def objective(config):
    for i in range(2):
        tune.report({"score": config["x"] * 10 + i})


class Recorder(tune.ProgressReporter):
    def __init__(self):
        self.calls = []

    def should_report(self, trials, done=False):
        return True

    def report(self, trials, done, *sys_info):
        self.calls.append((done, sorted(t.status.value for t in trials), sys_info))


def test_cli_reporter_and_a_custom_reporter(storage, capsys):
    tandem.init(num_cpus=2)
    reporter = tune.CLIReporter(metric_columns=["score"], parameter_columns=["x"],
                                max_report_frequency=60)
    tune.run(objective, config={"x": tune.grid_search([1, 2, 3])}, metric="score", mode="max",
             storage_path=storage, name="cli", verbose=1, progress_reporter=reporter)
    out = capsys.readouterr().out
    final = out[out.rindex("== Status =="):]
    assert "Using FIFO scheduling algorithm." in final
    assert "Current best trial: " in final and "with score=31 and params={'x': 3}" in final
    assert "Number of trials: 3 (3 TERMINATED)" in final
    header_line = next(line for line in final.splitlines() if "Trial name" in line)
    header = [c.strip() for c in header_line.strip("|").split("|")]
    assert header == ["Trial name", "status", "loc", "x", "score"]
    rows = [line for line in final.splitlines() if "TERMINATED |" in line]
    assert sorted(int(r.split("|")[-2]) for r in rows) == [11, 21, 31]

    rec = Recorder()
    tune.run(objective, config={"x": tune.grid_search([1, 2])}, storage_path=storage,
             name="custom", verbose=0, progress_reporter=rec)
    assert rec.calls and rec.calls[-1][0] is True
    assert rec.calls[-1][1] == ["TERMINATED", "TERMINATED"]
    assert not any(done for done, _, _ in rec.calls[:-1])

    with pytest.raises(Exception, match="give a tune.ProgressReporter"):
        tune.run(objective, progress_reporter="table")
