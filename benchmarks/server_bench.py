"""Train server speed: submit latency, list/get latency with a big history, report ingestion.

    python benchmarks/server_bench.py [--repeats 20] [--reports 100000]

Starts its own server (a subprocess on a free port, HOME and storage in a temp folder) and
prints a table:

* submit -> first report of a trivial 1-worker job on an idle server (median, p95);
  target <= 1 s median;
* ``GET /api/jobs`` and ``GET /api/jobs/{id}`` with 1,000 finished jobs in the history and
  100 queued (p50, p95); target <= 50 ms p95;
* reports ingested into the job store per second by one job reporting in a tight loop,
  with its event stream attached; target >= 10,000 reports/s;
* with ``--outage-s 10`` (default; 0 skips it): the same job on a server whose job store is
  a real PostgreSQL (``tests/conftest_postgres.py`` starts one) that is crashed
  (``pg_ctl -m immediate``) for 10 s mid-job: reports/s the server takes in during the
  outage (kept in memory and journaled), the rate at which the backlog drains once the
  database is back, and a check that every report is stored once.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def seed_history(db_path: str, n: int) -> None:
    """``n`` finished jobs with transitions and a few reports, written straight to the store."""
    from tandem.jobs.store import JobRecord, ReportRecord, open_store

    with open_store(db_path) as store:
        now = time.time() - n
        for i in range(n):
            job_id = f"job_hist{i:06d}"
            store.create_job(JobRecord(job_id, f"history-{i}", "PENDING", now + i,
                                       tags=("history",), spec_json={"num_workers": 1}))
            store.set_state(job_id, "RUNNING", now + i + 0.1)
            store.append_reports(job_id, [ReportRecord(job_id, s, {"loss": 1 / (s + 1)}, now + i)
                                          for s in range(5)])
            store.set_state(job_id, "FINISHED", now + i + 0.5)
            store.update_job(job_id, result={"metrics": {"loss": 0.2}, "path": "/tmp/x"})


def start_server(home: str, storage: str, *extra: str) -> tuple[subprocess.Popen, str, str]:
    port = free_port()
    env = {**os.environ, "HOME": home}
    env.pop("TANDEM_ADDRESS", None)
    log = open(os.path.join(storage, "bench-server.log"), "ab")
    proc = subprocess.Popen([sys.executable, "-m", "tandem.server", "--port", str(port),
                             "--storage", storage, *extra], env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    info_path = os.path.join(home, ".tandem", "server.json")
    for _ in range(600):
        try:
            info = json.load(open(info_path))
            if info["pid"] == proc.pid:
                r = httpx.get(info["address"] + "/api/health",
                              headers={"Authorization": f"Bearer {info['token']}"})
                if r.status_code == 200:
                    return proc, info["address"], info["token"]
        except (OSError, ValueError, KeyError, httpx.HTTPError):
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the server did not start")


def trivial(config):
    from tandem import train

    train.report({"x": 1})


def sleeper(config):
    import time as _t

    _t.sleep(config["sleep"])


def reporter(config):
    from tandem import train

    for i in range(config["n"]):
        train.report({"i": i, "loss": 1.0 / (i + 1)})


def timed_reporter(config):
    """Reports as fast as it can for ``seconds``; the last report says how many."""
    import time as _t

    from tandem import train

    end = _t.monotonic() + config["seconds"]
    i = 0
    while _t.monotonic() < end:
        train.report({"i": i})
        i += 1
    train.report({"i": i, "last": True})


def outage(root: str, outage_s: float) -> list[tuple[str, str, str, str]]:
    """Reports/s during and after a store outage of ``outage_s`` (a real PostgreSQL)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tandem.jobs import runtime
    from tandem.jobs.client import RemoteJobService, parse_sse
    from tandem.train import DataParallelTrainer, RunConfig
    from tests.conftest_postgres import start_postgres

    pg = start_postgres(durable_commits=True)
    home, storage = os.path.join(root, "home2"), os.path.join(root, "server2")
    os.makedirs(home)
    os.makedirs(storage)
    os.environ["HOME"] = home
    proc, url, token = start_server(home, storage, "--num-cpus", "1", "--usage-interval-s", "0",
                                    "--db", pg.url("postgres"))
    os.environ["TANDEM_ADDRESS"] = url
    service = RemoteJobService(url)
    runtime.set_service(service)
    http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    try:
        job_s = outage_s + 6
        h = DataParallelTrainer(timed_reporter, train_loop_config={"seconds": job_s},
                                run_config=RunConfig(storage_path=os.path.join(root, "r2"),
                                                     name="outage")).fit(block=False)
        seen = [0]
        marks: dict[str, tuple[float, int]] = {}

        def follow() -> None:
            with http.stream("GET", f"/api/jobs/{h.job_id}/events", timeout=None) as r:
                for event, data in parse_sse(r.iter_lines()):
                    if event == "reports":
                        seen[0] += len(json.loads(data)["rows"])
                    if event == "end":
                        return

        th = threading.Thread(target=follow, daemon=True)
        th.start()
        while seen[0] == 0:
            time.sleep(0.01)
        time.sleep(2)
        pg.crash()
        marks["down"] = (time.perf_counter(), seen[0])
        time.sleep(outage_s)
        marks["up"] = (time.perf_counter(), seen[0])
        backlog = http.get("/api/health").json().get("store_backlog", 0)
        pg.start_again()
        t_up = time.perf_counter()
        while True:  # answering again, then drained
            r = http.get("/api/health")
            if r.status_code == 200 and r.json().get("store_backlog") == 0:
                break
            time.sleep(0.02)
        drained = time.perf_counter() - t_up
        th.join(120)
        result = h.wait(120)
        total = result.metrics["i"] + 1
        while True:
            r = http.get(f"/api/jobs/{h.job_id}/results", params={"after_seq": total - 2}).json()
            if r["results"]:
                break
            time.sleep(0.05)
        seqs, after = 0, -1
        while True:
            page = http.get(f"/api/jobs/{h.job_id}/results",
                            params={"after_seq": after, "limit": 100_000}).json()["results"]
            if not page:
                break
            seqs += len(page)
            after = page[-1]["seq"]
        during = (marks["up"][1] - marks["down"][1]) / (marks["up"][0] - marks["down"][0])
        ok = "all stored once" if seqs == total == after + 1 else f"LOST: {seqs} of {total}"
        return [
            (f"reports/s while the store is down ({outage_s:.0f} s, PostgreSQL)",
             f"{during:,.0f} /s", f"{backlog:,} reports journaled", "no loss"),
            ("backlog drain once the store is back", f"{backlog / drained:,.0f} /s",
             f"{drained:.2f} s", ok),
        ]
    finally:
        runtime.set_service(None)
        service.shutdown()
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--history", type=int, default=1000)
    ap.add_argument("--queued", type=int, default=100)
    ap.add_argument("--reports", type=int, default=100_000)
    ap.add_argument("--outage-s", type=float, default=10.0,
                    help="length of the store outage in the last measure (0: skip it)")
    args = ap.parse_args()

    root = tempfile.mkdtemp(prefix="tandem-server-bench-")
    home, storage = os.path.join(root, "home"), os.path.join(root, "server")
    os.makedirs(home)
    os.makedirs(storage)
    os.environ["HOME"] = home
    seed_history(os.path.join(storage, "jobs.db"), args.history)
    proc, url, token = start_server(home, storage, "--num-cpus", "1", "--usage-interval-s", "0")
    os.environ["TANDEM_ADDRESS"] = url

    from tandem.jobs.client import RemoteJobService, parse_sse
    from tandem.train import DataParallelTrainer, RunConfig

    service = RemoteJobService(url)
    service.health()
    from tandem.jobs import runtime

    runtime.set_service(service)
    results = os.path.join(root, "results")
    rows: list[tuple[str, str, str, str]] = []
    try:
        # 1. submit -> first report, idle server
        lat = []
        for i in range(args.repeats + 2):
            t = DataParallelTrainer(trivial, run_config=RunConfig(storage_path=results, name=f"t{i}"))
            t0 = time.perf_counter()
            h = t.fit(block=False)
            next(iter(h.results()))
            lat.append(time.perf_counter() - t0)
            h.wait(60)
        lat = lat[2:]  # the first runs warm the client and the server up
        rows.append(("submit -> first report (1 worker, idle)", f"{statistics.median(lat) * 1e3:.0f} ms",
                     f"p95 {pct(lat, 95) * 1e3:.0f} ms", "median <= 1000 ms"))

        # 2. list/get with history + queue
        blocker = DataParallelTrainer(sleeper, train_loop_config={"sleep": 600},
                                      run_config=RunConfig(storage_path=results, name="blocker")).fit(block=False)
        queued = [DataParallelTrainer(trivial, run_config=RunConfig(storage_path=results, name=f"q{i}"))
                  .fit(block=False) for i in range(args.queued)]
        http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"})
        pending = http.get("/api/jobs", params={"state": "PENDING", "limit": 1000}).json()["jobs"]
        assert len(pending) == args.queued, len(pending)
        total = len(http.get("/api/jobs", params={"limit": 10000}).json()["jobs"])
        list_t, get_t = [], []
        ids = [q.job_id for q in queued[:10]] + [f"job_hist{i:06d}" for i in range(0, args.history, 100)]
        for i in range(200):
            t0 = time.perf_counter()
            r = http.get("/api/jobs")
            list_t.append(time.perf_counter() - t0)
            assert r.status_code == 200 and len(r.json()["jobs"]) == 100
            t0 = time.perf_counter()
            r = http.get(f"/api/jobs/{ids[i % len(ids)]}")
            get_t.append(time.perf_counter() - t0)
            assert r.status_code == 200
        rows.append((f"GET /api/jobs (100 of {total}, {args.queued} queued)",
                     f"{pct(list_t, 50) * 1e3:.1f} ms", f"p95 {pct(list_t, 95) * 1e3:.1f} ms", "p95 <= 50 ms"))
        rows.append(("GET /api/jobs/{id}", f"{pct(get_t, 50) * 1e3:.1f} ms",
                     f"p95 {pct(get_t, 95) * 1e3:.1f} ms", "p95 <= 50 ms"))
        for q in queued:
            q.stop()
        blocker.stop()
        blocker.wait(60)

        # 3. report ingestion with the event stream attached
        n = args.reports
        h = DataParallelTrainer(reporter, train_loop_config={"n": n},
                                run_config=RunConfig(storage_path=results, name="ingest")).fit(block=False)
        first: list[float] = []
        seen = [0]

        def follow() -> None:
            with http.stream("GET", f"/api/jobs/{h.job_id}/events", timeout=None) as r:
                for event, data in parse_sse(r.iter_lines()):
                    if event == "reports":
                        if not first:
                            first.append(time.perf_counter())
                        seen[0] += len(json.loads(data)["rows"])
                    if event == "end":
                        return

        th = threading.Thread(target=follow, daemon=True)
        th.start()
        while True:
            r = http.get(f"/api/jobs/{h.job_id}/results", params={"after_seq": n - 2}).json()
            if r["results"]:
                stored = time.perf_counter()
                break
            time.sleep(0.02)
        th.join(60)
        rate = n / (stored - first[0])
        rows.append((f"reports into the store ({n:,}, stream attached)", f"{rate:,.0f} /s",
                     f"streamed {seen[0]:,}", ">= 10,000 /s"))
        h.wait(60)
    finally:
        runtime.set_service(None)
        service.shutdown()
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)

    if args.outage_s > 0:
        rows.extend(outage(root, args.outage_s))

    from rich.console import Console
    from rich.table import Table

    table = Table(title="tandem train server")
    for col in ("measure", "value", "spread", "target"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    Console().print(table)


def dashboard_bench(history: int = 10_000, repeats: int = 50) -> list[tuple[str, str, str, str]]:
    """The dashboard with ``history`` finished jobs: server time of the jobs view (first
    page, a deep page, a state filter), next to the plain job list; and first paint in
    Debian's chromium (login done, page opened, until the jobs table shows its rows).

        python benchmarks/server_bench.py --dashboard [--history 10000]
    """
    root = tempfile.mkdtemp(prefix="tandem-dashboard-bench-")
    home, storage = os.path.join(root, "home"), os.path.join(root, "server")
    os.makedirs(home)
    os.makedirs(storage)
    t0 = time.perf_counter()
    seed_history(os.path.join(storage, "jobs.db"), history)
    print(f"seeded {history:,} finished jobs in {time.perf_counter() - t0:.0f} s", flush=True)
    proc, url, token = start_server(home, storage, "--num-cpus", "1", "--usage-interval-s", "0")
    rows: list[tuple[str, str, str, str]] = []
    try:
        http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"})

        cold: dict[str, float] = {}

        def timed(path: str, params: dict) -> tuple[list[float], list[float]]:
            wall, server = [], []
            for i in range(repeats + 3):
                t = time.perf_counter()
                r = http.get(path, params=params)
                dt = time.perf_counter() - t
                assert r.status_code == 200, r.text
                cold.setdefault(str(params), dt)
                if i >= 3:  # the first calls warm the caches up
                    wall.append(dt)
                    server.append(r.json().get("server_ms", float("nan")) / 1e3)
            return wall, server

        cases = [("jobs view, first page (50)", {"limit": 50}),
                 ("jobs view, page at offset 5,000", {"limit": 50, "offset": min(5000, history)}),
                 ("jobs view, state=FINISHED", {"limit": 50, "state": "FINISHED"})]
        for label, params in cases:
            wall, server = timed("/api/dashboard/jobs", params)
            rows.append((f"{label}, {history:,} in history", f"{pct(wall, 50) * 1e3:.1f} ms",
                         f"p95 {pct(wall, 95) * 1e3:.1f} ms, first call "
                         f"{cold[str(params)] * 1e3:.0f} ms (handler {pct(server, 50) * 1e3:.1f})",
                         "<= 300 ms"))
        wall, _ = timed("/api/jobs", {"limit": 50})
        rows.append(("peer: GET /api/jobs (50, plain list)", f"{pct(wall, 50) * 1e3:.1f} ms",
                     f"p95 {pct(wall, 95) * 1e3:.1f} ms", "-"))
        rows.append(_first_paint(url, token))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    return rows


def _first_paint(url: str, token: str, runs: int = 5) -> tuple[str, str, str, str]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return ("dashboard first paint", "skipped", "playwright is not installed", "<= 1 s")
    if not os.path.exists("/usr/bin/chromium"):
        return ("dashboard first paint", "skipped", "/usr/bin/chromium is missing", "<= 1 s")
    times, fcp = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium",
                                     args=["--no-sandbox", "--disable-gpu"])
        ctx = browser.new_context()
        page = ctx.new_page()
        page.goto(url + "/login")
        page.fill("#token", token)
        page.click("button[type=submit]")
        page.wait_for_selector("#jobs tbody tr[data-job]")
        for _ in range(runs):
            page.goto("about:blank")
            t = time.perf_counter()
            page.goto(url + "/#/jobs")
            page.wait_for_selector("#jobs tbody tr[data-job]")
            times.append(time.perf_counter() - t)
            fcp.append(page.evaluate(
                "performance.getEntriesByName('first-contentful-paint')[0]?.startTime || 0"))
        browser.close()
    return ("dashboard first paint (jobs table with rows)", f"{statistics.median(times) * 1e3:.0f} ms",
            f"first contentful paint {statistics.median(fcp):.0f} ms", "<= 1 s")


def _print(rows: list[tuple[str, str, str, str]], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in ("measure", "value", "spread", "target"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    Console().print(table)


if __name__ == "__main__":
    if "--dashboard" in sys.argv:
        ap = argparse.ArgumentParser()
        ap.add_argument("--dashboard", action="store_true")
        ap.add_argument("--history", type=int, default=10_000)
        ap.add_argument("--repeats", type=int, default=50)
        a = ap.parse_args()
        _print(dashboard_bench(a.history, a.repeats), "tandem dashboard")
    else:
        main()
