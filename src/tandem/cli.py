"""The ``tandem`` command line.

    tandem version
    tandem server start [--host H] [--port P] [--storage PATH] [--db URL] [--num-cpus N] [--foreground]
    tandem server stop | status
    tandem jobs list [--state S] [--name N] [--tag T] [--limit N]
    tandem jobs show ID | logs ID [-f] [--rank R] | stop ID
    tandem submit [--priority N] [--tag T] script.py [args...]
    tandem dashboard [PATH ...] [--open] [--port P]

Commands that talk to a server find it through ``--address``, ``$TANDEM_ADDRESS``, or the
local server's ``~/.tandem/server.json``. ``--json`` prints machine-readable output.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from tandem._core.errors import TandemError


def _console() -> Any:
    from rich.console import Console

    c = Console()
    if not c.is_terminal:
        c = Console(width=max(c.width, 200))
    return c


def _when(t: float | None) -> str:
    if not t:
        return "-"
    return datetime.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


def _duration(job: dict[str, Any]) -> str:
    start, end = job.get("started_at"), job.get("ended_at")
    if not start:
        return "-"
    import time

    s = (end or time.time()) - start
    return f"{s:.1f}s" if s < 120 else f"{s / 60:.1f}m"


def _conn(a: argparse.Namespace) -> Any:
    from tandem.jobs.client import ServerConnection, resolve_connection

    url, token = resolve_connection(a.address, a.token)
    return ServerConnection(url, token)


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))


# --------------------------------------------------------------------------- commands


def cmd_version(a: argparse.Namespace) -> int:
    from tandem import __version__

    if a.json:
        _print_json({"version": __version__, "python": sys.version.split()[0]})
    else:
        print(f"tandem {__version__} (Python {sys.version.split()[0]})")
    return 0


def cmd_server_start(a: argparse.Namespace) -> int:
    from tandem.server import daemon

    if a.foreground:
        return daemon.run_foreground(daemon.config_from_args(a))
    info = daemon.start_daemon(a)
    if a.json:
        _print_json({k: v for k, v in info.items() if k != "token"})
    else:
        print(f"tandem server running at {info['address']} (pid {info['pid']})")
        print(f"  jobs run:  on {info.get('cluster', 'this machine')}")
        print(f"  job store: {info['db']}")
        print(f"  log:       {info['log']}")
        print(f"  token:     in {os.path.join('~', '.tandem', 'server.json')} (clients read it)")
        print(f"Submit with TANDEM_ADDRESS={info['address'].split('://', 1)[1]} python train.py, "
              f"or `tandem submit train.py`.")
    return 0


def cmd_server_stop(a: argparse.Namespace) -> int:
    from tandem.server import daemon

    info = daemon.stop_daemon()
    if info is None:
        print("no tandem server is running (nothing in ~/.tandem/server.json)")
        return 1
    print(f"stopped the tandem server at {info['address']} (pid {info['pid']}); jobs that were "
          f"running are re-queued when it starts again")
    return 0


def cmd_server_status(a: argparse.Namespace) -> int:
    from tandem.jobs.client import read_server_file, server_file_path

    info = read_server_file() if not (a.address or os.environ.get("TANDEM_ADDRESS")) else None
    try:
        conn = _conn(a)
        health = conn.json("GET", "/api/health")
        cluster = conn.json("GET", "/api/cluster")
    except TandemError as e:
        if a.json:
            _print_json({"running": False, "error": str(e)})
        else:
            where = "" if info else f" ({server_file_path()} not found)"
            print(f"no tandem server is running{where}: {e}")
        return 1
    if a.json:
        _print_json({"running": True, "address": conn.url, **health, "cluster": cluster})
        return 0
    res = ", ".join(f"{k}={v:g}" for k, v in cluster["resources"].items() if k != "memory")
    free = ", ".join(f"{k}={v:g}" for k, v in cluster["available"].items() if k != "memory")
    print(f"tandem server {health['version']} at {conn.url} (pid {health['pid']})")
    print(f"  resources: {res}   free: {free}")
    print(f"  jobs: {cluster['num_running']} running, {cluster['num_pending']} pending")
    print(f"  job store: {health['store']}")
    return 0


def cmd_jobs_list(a: argparse.Namespace) -> int:
    params: dict[str, Any] = {"limit": a.limit}
    if a.state:
        params["state"] = [s.upper() for s in a.state]
    if a.name:
        params["name"] = a.name
    if a.tag:
        params["tag"] = a.tag
    jobs = _conn(a).json("GET", "/api/jobs", params=params)["jobs"]
    if a.json:
        _print_json(jobs)
        return 0
    from rich.table import Table

    t = Table(box=None, header_style="bold")
    for col in ("JOB ID", "STATE", "NAME", "PRIORITY", "SUBMITTED", "DURATION", "TAGS"):
        t.add_column(col, no_wrap=True, overflow="ignore")
    for j in jobs:
        t.add_row(j["job_id"], j["state"], j["name"], str(j["priority"]),
                  _when(j["submitted_at"]), _duration(j), ",".join(j["tags"]))
    _console().print(t)
    if not jobs:
        print("(no jobs)")
    return 0


def cmd_jobs_show(a: argparse.Namespace) -> int:
    conn = _conn(a)
    job = conn.json("GET", f"/api/jobs/{a.job_id}")
    if a.json:
        _print_json(job)
        return 0
    from rich.table import Table

    c = _console()
    t = Table(box=None, show_header=False)
    t.add_column(style="bold", no_wrap=True)
    t.add_column()
    spec = job.get("spec") or {}
    result = job.get("result") or {}
    rows = [("job", job["job_id"]), ("name", job["name"]), ("state", job["state"]),
            ("priority", str(job["priority"])), ("tags", ", ".join(job["tags"]) or "-"),
            ("workers", str(spec.get("num_workers", "?"))),
            ("submitted", _when(job["submitted_at"])), ("started", _when(job["started_at"])),
            ("ended", _when(job["ended_at"])), ("path", str(result.get("path", "-"))),
            ("checkpoint", str(result.get("checkpoint_path") or "-"))]
    if result.get("metrics"):
        rows.append(("metrics", json.dumps(result["metrics"], default=str)[:500]))
    if job.get("error"):
        rows.append(("error", job["error"]))
    for k, v in rows:
        t.add_row(k, v)
    c.print(t)
    c.print("[bold]transitions[/bold]")
    for tr in job["transitions"]:
        reason = f"  ({tr['reason']})" if tr.get("reason") else ""
        print(f"  {_when(tr['time'])}  {tr['from_state'] or '-'} -> {tr['to_state']}{reason}")
    if job.get("traceback"):
        print("traceback:\n" + job["traceback"])
    return 0


def cmd_jobs_logs(a: argparse.Namespace) -> int:
    conn = _conn(a)
    params: dict[str, Any] = {}
    if a.rank is not None:
        params["rank"] = a.rank
    if not a.follow:
        print(conn.json("GET", f"/api/jobs/{a.job_id}/logs", params=params)["text"], end="")
        return 0
    params["follow"] = "true"
    try:
        with conn.http.stream("GET", f"/api/jobs/{a.job_id}/logs", params=params,
                              timeout=conn._httpx.Timeout(10.0, read=None)) as r:
            conn.check(r)
            for chunk in r.iter_text():
                sys.stdout.write(chunk)
                sys.stdout.flush()
    except conn._httpx.TransportError as e:
        raise conn.unreachable(e) from None
    except KeyboardInterrupt:
        return 130
    return 0


def cmd_jobs_stop(a: argparse.Namespace) -> int:
    job = _conn(a).json("POST", f"/api/jobs/{a.job_id}/stop")
    if a.json:
        _print_json(job)
    else:
        print(f"{job['job_id']} {job['state']} (stop requested)")
    return 0


def cmd_submit(a: argparse.Namespace) -> int:
    from tandem.jobs import client

    url, token = client.resolve_connection(a.address, a.token)
    conn = client.ServerConnection(url, token)
    conn.json("GET", "/api/health")  # one clear message now if the server is down
    conn.close()
    fd, record = tempfile.mkstemp(prefix="tandem-submit-", suffix=".txt")
    os.close(fd)
    env = {**os.environ, client.ADDRESS_ENV: url, client.SUBMIT_RECORD_ENV: record}
    if token:
        env[client.TOKEN_ENV] = token
    if a.priority is not None:
        env[client.PRIORITY_ENV] = str(a.priority)
    if a.tag:
        env[client.TAGS_ENV] = ",".join(a.tag)
    try:
        code = subprocess.call([sys.executable, a.script, *a.args], env=env)
        with open(record) as f:
            ids = [line.strip() for line in f if line.strip()]
    except KeyboardInterrupt:
        code, ids = 130, []
    finally:
        os.unlink(record)
    if a.json:
        _print_json({"job_ids": ids, "exit_code": code})
    else:
        for job_id in ids:
            print(f"submitted {job_id}")
        if not ids:
            print(f"{a.script} submitted no job (does it call fit()?)", file=sys.stderr)
    return code


def cmd_dashboard(a: argparse.Namespace) -> int:
    """With PATHs, or without a reachable server: serve results on disk. Otherwise print
    (or open) the server dashboard's login link; the token rides in the URL fragment,
    which browsers never send, and the login page drops it from the address bar."""
    from urllib.parse import quote

    if not a.paths:
        from tandem.jobs.client import resolve_connection
        from tandem.server.daemon import ping

        try:
            url, token = resolve_connection(a.address, a.token)
        except TandemError:
            url, token = None, None
        if url and (a.address or ping(url, token or "")):
            link = f"{url}/login#token={quote(token or '')}"
            print(link)
            if a.open:
                import webbrowser

                webbrowser.open(link)
            return 0
        if a.address:
            raise TandemError(f"no train server answers at {a.address}; start one with "
                              f"`tandem server start`, or give a results folder: "
                              f"`tandem dashboard ~/tandem_results`")
    return _serve_results_dashboard(a)


def _serve_results_dashboard(a: argparse.Namespace) -> int:
    import secrets
    import socket

    import uvicorn

    from tandem.server.dashboard.local_app import check_paths, local_app
    from tandem.train.api.trainer import default_storage_path

    paths = check_paths(a.paths or [default_storage_path()]) if a.paths else []
    if not paths:
        default = default_storage_path()
        os.makedirs(default, exist_ok=True)
        paths = [default]
    token = secrets.token_urlsafe(24)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((a.host, a.port))
    except OSError as e:
        raise TandemError(f"cannot listen on {a.host}:{a.port} ({e}); pick another --port") from e
    host, port = sock.getsockname()[:2]
    link = f"http://{host}:{port}/login#token={token}"
    print(f"tandem dashboard over {', '.join(paths)}")
    print(link, flush=True)
    if a.open:
        import webbrowser

        webbrowser.open(link)
    config = uvicorn.Config(local_app(paths, token), log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    return 0


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    from tandem.server.daemon import add_server_args

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output")
    client = argparse.ArgumentParser(add_help=False, parents=[common])
    client.add_argument("--address", default=None,
                        help="the server, host:port (default: $TANDEM_ADDRESS or the local server)")
    client.add_argument("--token", default=None, help="the server's token (default: $TANDEM_TOKEN "
                        "or ~/.tandem/server.json)")

    p = argparse.ArgumentParser(prog="tandem", description="tandem: train and tune models.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("version", parents=[common], help="print the version").set_defaults(
        fn=cmd_version)

    server = sub.add_parser("server", help="run the train server").add_subparsers(
        dest="server_command", required=True, metavar="start|stop|status")
    start = server.add_parser("start", parents=[common], help="start the train server")
    add_server_args(start)
    start.add_argument("--foreground", action="store_true", help="stay attached (no daemon)")
    start.set_defaults(fn=cmd_server_start)
    server.add_parser("stop", parents=[common], help="stop the local train server").set_defaults(
        fn=cmd_server_stop)
    server.add_parser("status", parents=[client], help="is a server running?").set_defaults(
        fn=cmd_server_status)

    jobs = sub.add_parser("jobs", help="list, show, follow and stop jobs").add_subparsers(
        dest="jobs_command", required=True, metavar="list|show|logs|stop")
    ls = jobs.add_parser("list", parents=[client], help="list jobs, newest first")
    ls.add_argument("--state", action="append",
                    help="PENDING, RUNNING, RESTARTING, FINISHED, FAILED or STOPPED (repeatable)")
    ls.add_argument("--name", default=None)
    ls.add_argument("--tag", default=None)
    ls.add_argument("--limit", type=int, default=100)
    ls.set_defaults(fn=cmd_jobs_list)
    show = jobs.add_parser("show", parents=[client], help="one job in detail")
    show.add_argument("job_id")
    show.set_defaults(fn=cmd_jobs_show)
    logs = jobs.add_parser("logs", parents=[client], help="a job's output, by rank")
    logs.add_argument("job_id")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing until it ends")
    logs.add_argument("--rank", type=int, default=None)
    logs.set_defaults(fn=cmd_jobs_logs)
    stop = jobs.add_parser("stop", parents=[client], help="stop a job")
    stop.add_argument("job_id")
    stop.set_defaults(fn=cmd_jobs_stop)

    submit = sub.add_parser("submit", parents=[client],
                            help="run a script whose fit() calls go to the server")
    submit.add_argument("--priority", type=int, default=None, help="higher runs first")
    submit.add_argument("--tag", action="append", help="tag its jobs (repeatable)")
    submit.add_argument("script")
    submit.add_argument("args", nargs=argparse.REMAINDER)
    submit.set_defaults(fn=cmd_submit)

    dash = sub.add_parser(
        "dashboard", parents=[client],
        help="the server's dashboard link, or a dashboard over results on disk (PATH)")
    dash.add_argument("paths", nargs="*", metavar="PATH",
                      help="results folders to show without a server (default, when no server "
                           "runs: ~/tandem_results)")
    dash.add_argument("--open", action="store_true", help="open it in a browser")
    dash.add_argument("--host", default="127.0.0.1", help="with PATH: the address to listen on")
    dash.add_argument("--port", type=int, default=0, help="with PATH: the port (default: a free one)")
    dash.set_defaults(fn=cmd_dashboard)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except TandemError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
