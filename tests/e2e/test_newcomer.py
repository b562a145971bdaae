"""What a newcomer does first, against a train server running on their machine: the
README's examples run as written (`python examples/train_digits.py`, `tandem submit
examples/quickstart.py`), with no address given and their own module (`digits.py`)
beside them; `tandem jobs`, `tandem models` and the dashboard find the same server and
name states with the same words; `tandem jobs logs -f` follows a job that only reports."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tandem.server.dashboard.ondisk import ResultsIndex
from tests.e2e.conftest import _failure, line, tandem_command

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")


def _run(cmd: list[str], env: dict[str, str], cwd: str, timeout_s: float = 240
         ) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    assert proc.returncode == 0, _failure(" ".join(cmd), proc)
    return proc


def test_readme_examples_run_on_the_local_server_with_their_folder(server):
    user = server.user
    env = user.env()  # no TANDEM_ADDRESS: the server is found through ~/.tandem/server.json
    url = f"http://{server.address}"

    # a plain fit(): goes to the running server, says so, and brings examples/ along
    digits = _run([sys.executable, os.path.join(EXAMPLES, "train_digits.py"), "--epochs", "2"],
                  env, user.home)
    assert "final accuracy:" in digits.stdout and "after 2 epochs" in digits.stdout
    assert f"sending jobs to the train server running on this machine at {url}" in digits.stderr
    assert f"sending {EXAMPLES} (the folder of train_digits.py:" in digits.stderr
    assert "no working_dir" not in digits.stderr

    # `tandem submit` (TANDEM_ADDRESS set for the script): a Tuner whose trials are jobs
    sub = _run([*tandem_command(), "submit", os.path.join(EXAMPLES, "quickstart.py"),
                "--samples", "2", "--epochs", "2"], env, user.home)
    ids = [r.split()[1] for r in sub.stdout.splitlines() if r.startswith("submitted ")]
    assert len(ids) == 2, sub.stdout + sub.stderr
    assert "best accuracy:" in sub.stdout and "submitted no job" not in sub.stderr
    assert f"sending {EXAMPLES} (the folder of quickstart.py:" in sub.stderr

    # the CLI finds the same server with no flags; trial jobs and trials: the same words
    listing = user.cli("jobs", "list").stdout
    job_states = {r.split()[2]: r.split()[1] for r in listing.splitlines()
                  if r.split() and r.split()[0] in ids}
    assert len(job_states) == 2, listing
    assert "digits_ddp" in listing
    index = ResultsIndex([user.storage])
    (exp,) = [e for e in index.list_experiments() if e["name"] == "quickstart"]
    trial_states = {t["name"]: t["status"] for t in index.experiment(exp["id"])["trials"]}
    assert trial_states == job_states, (trial_states, listing)
    assert set(job_states.values()) == {"TERMINATED"}  # Ray's word, at max_t or before
    models = user.cli("models", "list").stdout
    assert f"the train server at {url}" in models, models


def test_jobs_logs_follow_shows_the_reports_of_a_silent_job(server):
    out = server.user.python("report_only.py", env=server.env())
    job_id = line(out, "JOB_ID")
    logs = server.user.cli("jobs", "logs", job_id, "-f", env=server.env(), timeout_s=120).stdout
    assert "(report 1) step=0 loss=1" in logs and "(report 3) step=2 loss=0.3333" in logs, logs
    assert logs.rstrip().endswith(f"job {job_id} FINISHED"), logs


HIDE = """\
import sys

class _Hide:  # as if the [server] extra were not installed
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] in ("fastapi", "uvicorn", "httpx"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Hide)
"""


def test_missing_extra_is_named_before_anything_starts(user, tmp_path):
    """Without the [server] extra's packages, the examples that serve stop at once (before
    training), naming the extra to install; so does model.serve() itself."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(HIDE)
    env = user.env(PYTHONPATH=os.pathsep.join(p for p in (str(hide), os.environ.get(
        "PYTHONPATH")) if p))
    serve = ("from tandem import model\n"
             "model.serve('digits')\n")
    for cmd in ([os.path.join(EXAMPLES, "model_serve.py")],
                [os.path.join(EXAMPLES, "model_quickstart.py")], ["-c", serve]):
        proc = subprocess.run([sys.executable, *cmd], env=env, cwd=user.home,
                              capture_output=True, text=True, timeout=120, check=False)
        what = " ".join(cmd)
        assert proc.returncode != 0, _failure(what, proc)
        assert "needs the [server] extra of tandem" in proc.stderr, _failure(what, proc)
        assert 'pip install "tandem-ml[server]"' in proc.stderr, _failure(what, proc)
        assert "MissingExtraError" in proc.stderr and "epoch" not in proc.stdout
