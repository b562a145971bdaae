"""Conformance suite for ``JobStore`` implementations.

Every implementation must pass ``JobStoreTestCase``. Use it by subclassing::

    from tandem.jobs.testing.store_conformance import JobStoreTestCase

    class TestJobStore(JobStoreTestCase):
        pass

The class parametrizes its ``store_url`` fixture over ``STORE_KINDS``: ``memory``
(``InMemoryJobStore``), ``sqlite`` (a file in ``tmp_path``), ``sqlite-memory``
(``sqlite:///:memory:``) and ``postgresql`` (a fresh database from the
``postgres_database_url`` fixture of ``tests/conftest_postgres.py``; skipped when that
plugin is not registered). A subclass adds an implementation by overriding ``store_url``
(return something ``open_store`` accepts) or ``store``.

Tests assert correctness only. The throughput and latency tests print their numbers
(run pytest with ``-s`` to see them) but never fail on timing.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from tandem._core.errors import JobNotFoundError, TandemError
from tandem.jobs.store import (
    DuplicateJobError,
    DuplicateReportError,
    JobRecord,
    JobStore,
    ReportRecord,
    TransitionRecord,
    UsageSample,
    open_store,
)

__all__ = ["STORE_KINDS", "JobStoreTestCase", "make_job"]

STORE_KINDS = ("memory", "sqlite", "sqlite-memory", "postgresql")
#: Kinds several processes can open at once.
SHARED_KINDS = ("sqlite", "postgresql")

T0 = 1_700_000_000.0


def make_job(job_id: str, *, submitted_at: float = T0, **overrides: object) -> JobRecord:
    """A job record with sensible defaults; ``overrides`` replace fields."""
    fields: dict[str, Any] = {
        "job_id": job_id,
        "name": "train",
        "state": "PENDING",
        "submitted_at": submitted_at,
        "priority": 0,
        "tags": (),
        "spec": b"\x80\x05spec-" + job_id.encode(),
        "spec_json": {"kind": "train", "num_workers": 2},
    }
    fields.update(overrides)
    return JobRecord(**fields)


def _reports(job_id: str, start: int, n: int, *, every_ckpt: int = 0) -> list[ReportRecord]:
    return [
        ReportRecord(
            job_id=job_id,
            seq=i,
            metrics={"loss": 1.0 / (i + 1), "step": i},
            time=T0 + i,
            rank=i % 2,
            checkpoint_path=(
                f"/ckpt/{job_id}/checkpoint_{i:06d}" if every_ckpt and i % every_ckpt == 0 else None
            ),
        )
        for i in range(start, start + n)
    ]


# --------------------------------------------------------------------------- child processes
# Plain `python -c` subprocesses (not multiprocessing, whose resource tracker outlives the
# test): they behave like the CLI processes that read a server's store.


def _child_main(argv: list[str]) -> None:
    """Entry point of a child: ``reader URL`` or ``writer URL PREFIX N``.

    Prints ``READY`` once its store is open, then one ``RESULT {json}`` line with
    ``{"count": <iterations or jobs written>, "errors": [tracebacks]}``. A reader loops
    until its stdin is closed.
    """
    kind, url = argv[0], argv[1]
    errors: list[str] = []
    count = 0
    stop = threading.Event()
    try:
        store = open_store(url)
        print("READY", flush=True)
        if kind == "reader":
            def wait_for_eof() -> None:
                sys.stdin.read()
                stop.set()

            threading.Thread(target=wait_for_eof, daemon=True).start()
            while not stop.is_set() and len(errors) <= 5:
                try:
                    for j in store.list_jobs(limit=50)[:5]:
                        got = store.get_job(j.job_id)
                        assert got is not None and got.job_id == j.job_id
                        store.get_reports(j.job_id, limit=100)
                    store.list_jobs(states=["RUNNING"], limit=20)
                    count += 1
                except Exception:  # noqa: BLE001 - report everything to the parent
                    errors.append(traceback.format_exc())
        else:
            prefix, n_jobs = argv[2], int(argv[3])
            for i in range(n_jobs):
                try:
                    _write_one_job(store, f"{prefix}{i:04d}", T0 + i)
                    count += 1
                except Exception:  # noqa: BLE001
                    errors.append(traceback.format_exc())
                    if len(errors) > 5:
                        break
        store.close()
    except Exception:  # noqa: BLE001
        print("READY", flush=True)
        errors.append(traceback.format_exc())
    print("RESULT " + json.dumps({"count": count, "errors": errors}), flush=True)


def _start_child(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    code = (
        "import sys; from tandem.jobs.testing.store_conformance import _child_main; "
        "_child_main(sys.argv[1:])"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def _wait_ready(proc: subprocess.Popen[str]) -> list[str]:
    """Reads the child's output up to ``READY``; returns what came before it."""
    assert proc.stdout is not None
    before: list[str] = []
    for line in proc.stdout:
        if line.strip() == "READY":
            return before
        before.append(line)
    raise AssertionError(f"child exited (rc={proc.wait()}) before READY:\n{''.join(before)}")


def _finish_child(proc: subprocess.Popen[str], name: str) -> dict[str, Any]:
    """Closes the child's stdin, waits for it and returns its RESULT."""
    # Read through proc.stdout, not communicate(): _wait_ready's reads may already hold
    # later lines in the file object's buffer, which communicate() would skip.
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    out = proc.stdout.read()
    proc.wait(timeout=60)
    for line in out.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[len("RESULT ") :]))
    raise AssertionError(f"{name} (rc={proc.returncode}) printed no RESULT:\n{out}")


def _write_one_job(store: JobStore, job_id: str, at: float) -> None:
    store.create_job(make_job(job_id, submitted_at=at, tags=("mp",)))
    store.set_state(job_id, "RUNNING", at=at + 1)
    store.append_reports(job_id, _reports(job_id, 0, 50, every_ckpt=10))
    store.append_usage([UsageSample(job_id, 0, at + 2, 50.0, 1 << 20)])
    store.update_job(job_id, result={"metrics": {"loss": 0.1}})
    store.set_state(job_id, "FINISHED", at=at + 3)


# --------------------------------------------------------------------------- the suite


class JobStoreTestCase:
    """Tests every ``JobStore`` must pass. Subclass it in a test module (see module doc)."""

    # ----------------------------------------------------------------- fixtures

    @pytest.fixture(params=STORE_KINDS)
    def store_url(self, request: pytest.FixtureRequest, tmp_path: Any) -> str | None:
        """What ``open_store`` opens for this parameter (``None``: in-memory store)."""
        kind = request.param
        if kind == "memory":
            return None
        if kind == "sqlite":
            return f"sqlite:///{tmp_path / 'jobs.db'}"
        if kind == "sqlite-memory":
            return "sqlite:///:memory:"
        if kind == "postgresql":
            try:
                return request.getfixturevalue("postgres_database_url")
            except pytest.FixtureLookupError:
                msg = (
                    "the postgres_database_url fixture is not registered; add "
                    "pytest_plugins = ['tests.conftest_postgres'] to the root conftest.py "
                    "(the server itself comes from .ci/install_postgres.sh)"
                )
                if os.environ.get("CI"):
                    pytest.fail(msg, pytrace=False)
                pytest.skip(msg)
        raise AssertionError(f"unknown store kind {kind!r}")

    @pytest.fixture
    def store(self, store_url: str | None) -> Iterator[JobStore]:
        s = open_store(store_url)
        try:
            yield s
        finally:
            s.close()

    @pytest.fixture
    def shared_url(self, store_url: str | None) -> str:
        """``store_url`` when several processes can open it; skips otherwise."""
        if store_url is None or ":memory:" in store_url:
            pytest.skip("an in-memory store cannot be shared between processes")
        return store_url

    # ----------------------------------------------------------------- jobs

    @pytest.mark.timeout(30)
    def test_create_get_round_trip(self, store: JobStore) -> None:
        job = make_job(
            "job_a",
            name="resnet",
            priority=5,
            tags=["tune", "exp-1"],
            spec=bytes(range(256)) * 4,
            spec_json={"scaling": {"num_workers": 4, "use_gpu": False}, "lr": [0.1, 0.01]},
            result={"metrics": {"acc": 0.9}, "checkpoint_path": None, "path": "/r/a"},
            error=None,
        )
        store.create_job(job)
        got = store.get_job("job_a")
        assert got == job
        assert got is not None and got.tags == ("tune", "exp-1")
        assert got.spec == bytes(range(256)) * 4
        assert store.get_job("nope") is None

    @pytest.mark.timeout(30)
    def test_stored_dicts_are_detached_copies(self, store: JobStore) -> None:
        spec_json: dict[str, Any] = {"a": [1, 2], "t": (1, 2)}
        store.create_job(make_job("j", spec_json=spec_json))
        spec_json["a"].append(3)
        got = store.get_job("j")
        assert got is not None
        assert got.spec_json == {"a": [1, 2], "t": [1, 2]}  # tuples come back as lists

    @pytest.mark.timeout(30)
    def test_create_duplicate_raises(self, store: JobStore) -> None:
        store.create_job(make_job("dup"))
        with pytest.raises(DuplicateJobError, match="dup"):
            store.create_job(make_job("dup", name="other"))
        got = store.get_job("dup")
        assert got is not None and got.name == "train"
        assert len(store.transitions("dup")) == 1
        assert isinstance(DuplicateJobError("x"), TandemError)

    @pytest.mark.timeout(30)
    def test_initial_transition(self, store: JobStore) -> None:
        store.create_job(make_job("j", submitted_at=T0 + 7))
        assert store.transitions("j") == [TransitionRecord("j", None, "PENDING", T0 + 7)]
        assert store.transitions("unknown") == []

    @pytest.mark.timeout(30)
    def test_set_state_lifecycle(self, store: JobStore) -> None:
        store.create_job(make_job("j"))
        r = store.set_state("j", "RUNNING", at=T0 + 1)
        assert (r.state, r.started_at, r.ended_at, r.spec) == ("RUNNING", T0 + 1, None, None)
        store.set_state("j", "RESTARTING", at=T0 + 2, reason="worker 1 died")
        store.set_state("j", "RUNNING", T0 + 3)  # `at` may be positional
        r = store.set_state("j", "FAILED", at=T0 + 4, error="boom", traceback="Traceback...\nboom")
        assert r.is_terminal
        got = store.get_job("j")
        assert got is not None
        assert got.state == "FAILED"
        assert got.started_at == T0 + 1  # first RUNNING only
        assert got.ended_at == T0 + 4
        assert (got.error, got.traceback) == ("boom", "Traceback...\nboom")
        assert got.spec is not None  # set_state leaves the spec alone
        assert r == dataclasses.replace(got, spec=None)
        assert store.transitions("j") == [
            TransitionRecord("j", None, "PENDING", T0),
            TransitionRecord("j", "PENDING", "RUNNING", T0 + 1),
            TransitionRecord("j", "RUNNING", "RESTARTING", T0 + 2, "worker 1 died"),
            TransitionRecord("j", "RESTARTING", "RUNNING", T0 + 3),
            TransitionRecord("j", "RUNNING", "FAILED", T0 + 4, "boom"),
        ]
        # A second terminal state keeps the first ended_at.
        store.set_state("j", "STOPPED", at=T0 + 9)
        got = store.get_job("j")
        assert got is not None and got.ended_at == T0 + 4 and got.error == "boom"

    @pytest.mark.timeout(30)
    def test_set_state_unknown_job(self, store: JobStore) -> None:
        with pytest.raises(JobNotFoundError, match="ghost"):
            store.set_state("ghost", "RUNNING", at=T0)
        store.create_job(make_job("j"))
        with pytest.raises(ValueError):
            store.set_state("j", "", at=T0)
        with pytest.raises(TypeError, match="epoch seconds"):
            store.set_state("j", "RUNNING", at="now")  # type: ignore[arg-type]
        assert len(store.transitions("j")) == 1

    @pytest.mark.timeout(30)
    def test_update_job(self, store: JobStore) -> None:
        store.create_job(make_job("j", tags=["a"]))
        store.update_job(
            "j",
            priority=3,
            tags=["b", "c"],
            result={"metrics": {"loss": 0.5}, "checkpoint_path": "/c/1", "path": "/r"},
            spec=b"new",
            spec_json={"x": 1},
            name="renamed",
        )
        got = store.get_job("j")
        assert got is not None
        assert (got.priority, got.tags, got.spec, got.spec_json, got.name) == (
            3,
            ("b", "c"),
            b"new",
            {"x": 1},
            "renamed",
        )
        assert got.result == {"metrics": {"loss": 0.5}, "checkpoint_path": "/c/1", "path": "/r"}
        assert [j.job_id for j in store.list_jobs(tag="b")] == ["j"]
        assert store.list_jobs(tag="a") == []
        store.update_job("j", result=None, tags=[])
        got = store.get_job("j")
        assert got is not None and got.result is None and got.tags == ()
        assert len(store.transitions("j")) == 1  # update_job records no transition

    @pytest.mark.timeout(30)
    def test_update_job_errors(self, store: JobStore) -> None:
        store.create_job(make_job("j"))
        with pytest.raises(ValueError, match="set_state"):
            store.update_job("j", state="RUNNING")
        with pytest.raises(ValueError, match="bogus"):
            store.update_job("j", bogus=1)
        with pytest.raises(TypeError):
            store.update_job("j", tags="single")
        with pytest.raises(TypeError):
            store.update_job("j", spec_json=[1, 2])
        with pytest.raises(JobNotFoundError, match="ghost"):
            store.update_job("ghost", priority=1)
        got = store.get_job("j")
        assert got is not None and got.state == "PENDING"

    @pytest.mark.timeout(30)
    def test_list_filters(self, store: JobStore) -> None:
        specs = [
            ("a", "PENDING", "mnist", ("x",)),
            ("b", "RUNNING", "mnist", ("x", "y")),
            ("c", "FINISHED", "cifar", ("y",)),
            ("d", "FAILED", "cifar", ()),
            ("e", "RUNNING", "cifar", ("x",)),
        ]
        for i, (jid, state, name, tags) in enumerate(specs):
            store.create_job(make_job(jid, submitted_at=T0 + i, state=state, name=name, tags=tags))

        def ids(**kw: Any) -> list[str]:
            return sorted(j.job_id for j in store.list_jobs(**kw))

        assert ids() == ["a", "b", "c", "d", "e"]
        assert ids(states="RUNNING") == ["b", "e"]
        assert ids(states=["FINISHED", "FAILED"]) == ["c", "d"]
        assert ids(states=[]) == []
        assert ids(name="cifar") == ["c", "d", "e"]
        assert ids(tag="x") == ["a", "b", "e"]
        assert ids(tag="y", name="mnist") == ["b"]
        assert ids(states=("RUNNING",), name="cifar", tag="x") == ["e"]
        assert ids(tag="none") == []
        assert ids(name="zzz") == []

    @pytest.mark.timeout(30)
    def test_list_ordering_and_paging(self, store: JobStore) -> None:
        # Two jobs share a submit time: job_id breaks the tie.
        times = {"j0": 3.0, "j1": 1.0, "j2": 2.0, "j3": 2.0, "j4": 5.0, "j5": 4.0}
        for jid, t in times.items():
            store.create_job(make_job(jid, submitted_at=T0 + t))
        asc = ["j1", "j2", "j3", "j0", "j5", "j4"]
        assert [j.job_id for j in store.list_jobs(order="asc")] == asc
        assert [j.job_id for j in store.list_jobs()] == asc[::-1]
        pages = [store.list_jobs(limit=4, offset=o, order="asc") for o in (0, 4, 8)]
        assert [[j.job_id for j in p] for p in pages] == [asc[:4], asc[4:], []]
        assert store.list_jobs(limit=0) == []
        for bad in ({"limit": -1}, {"offset": -1}, {"order": "up"}):
            with pytest.raises(ValueError):
                store.list_jobs(**bad)

    @pytest.mark.timeout(30)
    def test_list_omits_spec(self, store: JobStore) -> None:
        store.create_job(make_job("j", spec=b"x" * 100_000, spec_json={"k": 1}))
        (listed,) = store.list_jobs()
        assert listed.spec is None
        assert listed.spec_json == {"k": 1}
        got = store.get_job("j")
        assert got is not None and got.spec == b"x" * 100_000

    # ----------------------------------------------------------------- reports

    @pytest.mark.timeout(30)
    def test_reports_round_trip_and_paging(self, store: JobStore) -> None:
        store.create_job(make_job("j"))
        store.create_job(make_job("other"))
        for start in range(0, 2500, 500):
            store.append_reports("j", _reports("j", start, 500, every_ckpt=100))
        store.append_reports("other", _reports("other", 0, 3))
        store.append_reports("j", [])  # no-op

        seen: list[ReportRecord] = []
        after = -1
        while True:
            page = store.get_reports("j", after_seq=after, limit=1000)
            if not page:
                break
            seen.extend(page)
            after = page[-1].seq
        assert [r.seq for r in seen] == list(range(2500))
        assert seen[7] == ReportRecord("j", 7, {"loss": 1.0 / 8, "step": 7}, T0 + 7, 1, None)
        assert seen[100].checkpoint_path == "/ckpt/j/checkpoint_000100"
        assert [r.seq for r in store.get_reports("j", after_seq=2497)] == [2498, 2499]
        assert store.get_reports("j", limit=0) == []
        assert store.get_reports("unknown") == []
        ckpts = store.get_reports("j", with_checkpoint=True, limit=3)
        assert [r.seq for r in ckpts] == [0, 100, 200]
        assert store.checkpoint_paths("j") == [
            f"/ckpt/j/checkpoint_{i:06d}" for i in range(0, 2500, 100)
        ]
        assert len(store.get_reports("other")) == 3

    @pytest.mark.timeout(30)
    def test_report_values(self, store: JobStore) -> None:
        store.create_job(make_job("j"))
        metrics: dict[str, Any] = {
            "nan": float("nan"),
            "inf": float("inf"),
            "nested": {"a": (1, 2)},
            "text": "ok",
            "none": None,
            "flag": True,
        }
        try:
            import numpy as np

            metrics["np"] = np.float32(0.5)
            metrics["arr"] = np.arange(3)
        except ImportError:  # pragma: no cover - numpy is a dependency
            pass
        store.append_reports(
            "j", [ReportRecord("j", 0, metrics, T0, rank=None, checkpoint_path="s3://b/c")]
        )
        (r,) = store.get_reports("j")
        m = r.metrics
        assert math.isnan(m["nan"]) and m["inf"] == float("inf")
        assert m["nested"] == {"a": [1, 2]} and m["text"] == "ok" and m["none"] is None
        assert m["flag"] is True
        if "np" in metrics:
            assert m["np"] == 0.5 and type(m["np"]) is float and m["arr"] == [0, 1, 2]
        assert (r.rank, r.checkpoint_path) == (None, "s3://b/c")
        with pytest.raises(TypeError, match="object"):
            store.append_reports("j", [ReportRecord("j", 1, {"bad": object()}, T0)])
        assert len(store.get_reports("j")) == 1

    @pytest.mark.timeout(30)
    def test_report_errors_store_nothing(self, store: JobStore) -> None:
        store.create_job(make_job("j"))
        store.append_reports("j", _reports("j", 0, 10))
        with pytest.raises(DuplicateReportError):
            store.append_reports("j", _reports("j", 10, 5) + _reports("j", 9, 1))
        with pytest.raises(DuplicateReportError):
            store.append_reports("j", _reports("j", 10, 2) + _reports("j", 10, 1))
        assert [r.seq for r in store.get_reports("j")] == list(range(10))
        with pytest.raises(JobNotFoundError, match="ghost"):
            store.append_reports("ghost", _reports("ghost", 0, 2))
        with pytest.raises(ValueError, match="other"):
            store.append_reports("j", _reports("other", 100, 1))
        assert store.get_reports("ghost") == []

    @pytest.mark.timeout(30)
    def test_out_of_order_batches(self, store: JobStore) -> None:
        store.create_job(make_job("j"))
        store.append_reports("j", _reports("j", 10, 5))
        store.append_reports("j", _reports("j", 0, 5)[::-1])
        assert [r.seq for r in store.get_reports("j")] == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]
        assert [r.seq for r in store.get_reports("j", after_seq=3, limit=3)] == [4, 10, 11]

    # ----------------------------------------------------------------- usage

    @pytest.mark.timeout(30)
    def test_usage(self, store: JobStore) -> None:
        store.create_job(make_job("j"))
        store.create_job(make_job("k"))
        samples = [
            UsageSample(
                "j",
                rank,
                T0 + t,
                10.0 * rank + t,
                1000 + t,
                None if rank else 55.5,
                None if rank else 1 << 33,
            )
            for t in range(5)
            for rank in (1, 0)
        ]
        store.append_usage(samples + [UsageSample("k", 0, T0, 1.0, 1)])
        got = store.get_usage("j")
        assert got == sorted(samples, key=lambda s: (s.time, s.rank))
        assert got[0] == UsageSample("j", 0, T0, 0.0, 1000, 55.5, 1 << 33)
        assert got[1].gpu_util is None and got[1].gpu_mem_bytes is None
        assert [s.time for s in store.get_usage("j", rank=1)] == [T0 + t for t in range(5)]
        assert [(s.time, s.rank) for s in store.get_usage("j", since=T0 + 3)] == [
            (T0 + 4, 0),
            (T0 + 4, 1),
        ]
        assert len(store.get_usage("j", limit=3)) == 3
        assert store.get_usage("unknown") == []
        with pytest.raises(JobNotFoundError, match="ghost"):
            store.append_usage(
                [UsageSample("k", 0, T0 + 1, 1.0, 1), UsageSample("ghost", 0, T0, 1.0, 1)]
            )
        assert len(store.get_usage("k")) == 1
        store.append_usage([])

    # ----------------------------------------------------------------- concurrency

    @pytest.mark.timeout(60)
    def test_threads(self, store: JobStore) -> None:
        errors: list[BaseException] = []
        stop = threading.Event()

        def writer(w: int) -> None:
            try:
                for i in range(15):
                    jid = f"w{w}_{i:03d}"
                    store.create_job(make_job(jid, submitted_at=T0 + i))
                    store.set_state(jid, "RUNNING", at=T0 + i + 0.5)
                    store.append_reports(jid, _reports(jid, 0, 20))
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        def reader() -> None:
            try:
                while not stop.is_set():
                    for j in store.list_jobs(limit=20):
                        assert store.get_job(j.job_id) is not None
                        store.get_reports(j.job_id, limit=5)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        writers = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        readers = [threading.Thread(target=reader) for _ in range(2)]
        for t in writers + readers:
            t.start()
        for t in writers:
            t.join()
        stop.set()
        for t in readers:
            t.join()
        assert errors == []
        jobs = store.list_jobs(limit=1000)
        assert len(jobs) == 60 and all(j.state == "RUNNING" for j in jobs)
        assert all(len(store.get_reports(j.job_id)) == 20 for j in jobs)

    @pytest.mark.timeout(90)
    def test_processes_read_while_writing(self, shared_url: str) -> None:
        """Two reader processes and a writer process run while this process writes too."""
        store = open_store(shared_url)  # creates the schema before the children start
        procs = {
            "reader-1": _start_child("reader", shared_url),
            "reader-2": _start_child("reader", shared_url),
            "writer": _start_child("writer", shared_url, "child_", "40"),
        }
        try:
            t = time.perf_counter()
            for proc in procs.values():
                _wait_ready(proc)
            t_started = time.perf_counter()
            for i in range(40):
                _write_one_job(store, f"main_{i:04d}", T0 + i)
            t_main = time.perf_counter()
            # The writer finishes on its own; closing the readers' stdin stops them.
            outcomes = {"writer": _finish_child(procs["writer"], "writer")}
            t_child = time.perf_counter()
            print(
                f"\n[{store!r}] children ready in {t_started - t:.2f} s; main wrote 40 jobs in "
                f"{t_main - t_started:.2f} s; child writer done after {t_child - t_started:.2f} s"
            )
            for name in ("reader-1", "reader-2"):
                outcomes[name] = _finish_child(procs[name], name)
        finally:
            for proc in procs.values():
                if proc.poll() is None:  # pragma: no cover - only after a failure
                    proc.kill()
                proc.wait()
                for f in (proc.stdin, proc.stdout):
                    if f is not None:
                        f.close()
        try:
            for name, outcome in outcomes.items():
                assert outcome["errors"] == [], f"{name} failed:\n" + "\n".join(outcome["errors"])
                assert outcome["count"] > 0, f"{name} did no work"
            assert outcomes["writer"]["count"] == 40
            assert len(store.list_jobs(states="FINISHED", tag="mp", limit=1000)) == 80
            for jid in ("main_0039", "child_0039"):
                assert len(store.get_reports(jid)) == 50
                assert [t.to_state for t in store.transitions(jid)] == [
                    "PENDING",
                    "RUNNING",
                    "FINISHED",
                ]
        finally:
            store.close()

    @pytest.mark.timeout(60)
    def test_reopen_keeps_data(self, shared_url: str) -> None:
        with open_store(shared_url) as s:
            s.create_job(make_job("j"))
            s.append_reports("j", _reports("j", 0, 3))
        with open_store(shared_url) as s:
            assert s.get_job("j") == make_job("j")
            assert len(s.get_reports("j")) == 3

    # ----------------------------------------------------------------- speed (printed, not asserted)

    @pytest.mark.timeout(60)
    def test_bulk_report_throughput(self, store: JobStore) -> None:
        store.create_job(make_job("bulk"))
        n, batch = 20_000, 500
        batches = [_reports("bulk", s, batch, every_ckpt=250) for s in range(0, n, batch)]
        t = time.perf_counter()
        for b in batches:
            store.append_reports("bulk", b)
        dt = time.perf_counter() - t
        print(
            f"\n[{store!r}] append_reports: {n} reports in batches of {batch}: {n / dt:,.0f} reports/s"
        )
        t = time.perf_counter()
        total = 0
        after = -1
        while page := store.get_reports("bulk", after_seq=after, limit=1000):
            total += len(page)
            after = page[-1].seq
        dt = time.perf_counter() - t
        print(f"[{store!r}] get_reports: {total} reports read back: {total / dt:,.0f} reports/s")
        assert total == n

    @pytest.mark.timeout(60)
    def test_listing_latency_with_history(self, store: JobStore) -> None:
        states = ("FINISHED", "FAILED", "STOPPED", "RUNNING", "PENDING")
        for i in range(1000):
            store.create_job(
                make_job(
                    f"h{i:05d}",
                    submitted_at=T0 + i,
                    state=states[i % 5],
                    name=f"exp{i % 20}",
                    tags=(f"t{i % 7}",),
                    spec=b"s" * 2000,
                    spec_json={"config": {"lr": 0.01 * i, "layers": [64, 64]}},
                )
            )
        calls = {
            "list_jobs()": lambda i: store.list_jobs(),
            "list_jobs(states=RUNNING)": lambda i: store.list_jobs(states="RUNNING"),
            "list_jobs(name=..)": lambda i: store.list_jobs(name=f"exp{i % 20}"),
            "list_jobs(tag=..)": lambda i: store.list_jobs(tag=f"t{i % 7}"),
            "list_jobs(offset=900)": lambda i: store.list_jobs(offset=900),
            "get_job": lambda i: store.get_job(f"h{(i * 37) % 1000:05d}"),
        }
        for label, call in calls.items():
            times = []
            for i in range(40):
                t = time.perf_counter()
                call(i)
                times.append(time.perf_counter() - t)
            p95 = statistics.quantiles(times, n=20)[-1]
            print(f"[{store!r}] {label}: p95 {p95 * 1000:.2f} ms")
        newest = store.list_jobs(limit=3)
        assert [j.job_id for j in newest] == ["h00999", "h00998", "h00997"]
        assert len(store.list_jobs(states="RUNNING", limit=1000)) == 200
        assert len(store.list_jobs(name="exp3", limit=1000)) == 50
        assert len(store.list_jobs(offset=900, limit=1000)) == 100
