"""The ``tandem`` command line.

    tandem version
    tandem server start [--host H] [--port P] [--storage PATH] [--db URL] [--num-cpus N] [--foreground]
    tandem server stop | status
    tandem jobs list [--state S] [--name N] [--tag T] [--limit N]
    tandem jobs show ID | logs ID [-f] [--rank R] | stop ID
    tandem submit [--priority N] [--tag T] script.py [args...]
    tandem dashboard [PATH ...] [--open] [--port P]
    tandem models list [NAME] | show NAME[@V] | alias NAME ALIAS V | delete NAME@V
    tandem serve NAME[@V|@ALIAS] [--port P] [--replicas N] [--max-batch-size B]
    tandem users add NAME [--role admin|member|viewer] [--group G] | list | revoke NAME
    tandem users set-role NAME ROLE | set-group NAME GROUP | leave-group NAME
    tandem audit [--user U] [--action A] [--limit N]
    tandem quotas list | set NAME [--cpus N] [--gpus N] [--memory BYTES] [--queued-jobs N] | delete NAME
    tandem quotas set --group G [--cpus N] ... | delete --group G

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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tandem._core.errors import TandemError
from tandem._core.extras import require_extras

if TYPE_CHECKING:
    from tandem.cluster.warm_host import HostInfo


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


def _print_json(obj: object) -> None:
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
    require_extras("server", what="`tandem server start`")
    from tandem.server import daemon

    if a.foreground:
        return daemon.run_foreground(daemon.config_from_args(a))
    info = daemon.start_daemon(a)
    if a.json:
        _print_json({k: v for k, v in info.items() if k != "token"})
    else:
        print(f"tandem server running at {info['address']} (pid {info['pid']})")
        print(f"  listening: {info.get('bound', info['address'])}"
              + (" over HTTPS" if info.get("tls_cert") else ""))
        if a.expose:
            print("  warning:   reachable beyond this machine: anyone with the token runs code "
                  "here" + ("" if info.get("tls_cert") else "; traffic is NOT encrypted "
                            "(give --tls-cert and --tls-key)"))
        print(f"  jobs run:  on {info.get('cluster', 'this machine')}")
        print(f"  job store: {info['db']}")
        print(f"  log:       {info['log']}")
        print(f"  token:     in {os.path.join('~', '.tandem', 'server.json')} (clients read it)")
        print(f"Submit with TANDEM_ADDRESS={info['address'].split('://', 1)[1]} python train.py, "
              f"or `tandem submit train.py`.")
    return 0


def cmd_server_stop(a: argparse.Namespace) -> int:
    from tandem.server import daemon

    info = daemon.stop_daemon(storage=a.storage)
    if info is None:
        print(f"no tandem server is running (none named in ~/.tandem/server.json, none in "
              f"{daemon.pid_file_path(a.storage)})")
        return 1
    print(f"stopped the tandem server at {info.get('address', '?')} (pid {info['pid']}); jobs that were "
          f"running are re-queued when it starts again")
    return 0


def _warm_line(info: HostInfo) -> str:
    return (f"warm host pid {info['pid']} ({info['key']}): {', '.join(info['preloaded']) or 'no'}"
            f" preload(s), {info['learned']} learned import(s), {info['pss_mb']:.0f} MiB of "
            f"{info['max_pss_mb']:.0f} MiB PSS, {len(info['zygotes'])} program(s) connected, "
            f"{info['served']} served; socket {info['socket']}")


def cmd_warm_start(a: argparse.Namespace) -> int:
    from tandem.cluster import warm_host

    preload = [m.strip() for arg in a.preload for m in arg.split(",") if m.strip()]
    try:
        info = warm_host.start_host(preload, idle_timeout_s=a.idle_timeout,
                                max_pss_mb=a.max_pss_mb, detach=True)
    except (ValueError, OSError) as e:
        raise TandemError(f"could not start the warm host: {e}") from e
    info.pop("process", None)
    if a.json:
        _print_json(info)
    else:
        print(("a warm host was running already: " if info.get("already") else "started a ")
              + _warm_line(info))
        if info.get("error"):
            print(f"warning: could not preload {info['error']}", file=sys.stderr)
    return 1 if info.get("error") else 0


def cmd_warm_status(a: argparse.Namespace) -> int:
    from tandem.cluster import warm_host

    hosts = warm_host.running_hosts()
    if a.json:
        _print_json({"hosts": hosts, "dir": warm_host.host_dir()})
    elif not hosts:
        print(f"no warm host is running (none in {warm_host.host_dir()}); start one with "
              f"`tandem warm start --preload torch`")
    for info in hosts:
        print(_warm_line(info))
    return 0 if hosts else 1


def cmd_warm_stop(a: argparse.Namespace) -> int:
    from tandem.cluster import warm_host

    stopped = warm_host.stop_hosts()
    if a.json:
        _print_json({"stopped": stopped})
    elif not stopped:
        print(f"no warm host is running (none in {warm_host.host_dir()})")
    for info in stopped:
        print(f"stopped the warm host pid {info['pid']} ({info['key']}); programs connected "
              f"to it keep their workers until they exit")
    return 0


def cmd_server_status(a: argparse.Namespace) -> int:
    from tandem.jobs.client import read_server_file, server_file_path
    from tandem.jobs.client.discovery import env_address

    info = read_server_file() if not (a.address or env_address()) else None
    try:
        conn = _conn(a)
        health = conn.json("GET", "/api/health")
        cluster = conn.json("GET", "/api/cluster")
    except TandemError as e:
        if a.json:
            _print_json({"running": False, "error": str(e)})
        else:
            from tandem.server import daemon

            found = daemon.read_pid_file(os.path.join("~", ".tandem", "server"))
            if info is None and found and daemon._is_server_process(found["pid"]):
                print(f"a tandem server runs at {found.get('address')} (pid {found['pid']}), but "
                      f"{server_file_path()} is damaged, so clients cannot find it; restart it "
                      f"(`tandem server stop`, then `tandem server start`) to write it again")
                return 1
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
    pool = cluster.get("warm_pool")
    if pool:
        print(f"  warm pool: {pool['pss_mb']:g} MiB of {pool['max_pss_mb']:g} MiB, "
              f"{pool['warm_workers']} warm worker(s), {pool['learned_modules']} learned imports")
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
    for col in ("JOB ID", "STATE", "NAME", "OWNER", "PRIORITY", "SUBMITTED", "DURATION", "TAGS"):
        t.add_column(col, no_wrap=True, overflow="ignore")
    for j in jobs:
        t.add_row(j["job_id"], _state_shown(j), j["name"], str(j.get("owner") or "-"),
                  str(j["priority"]),
                  _when(j["submitted_at"]), _duration(j), ",".join(j["tags"]))
    _console().print(t)
    if not jobs:
        print("(no jobs)")
    return 0


def _state_shown(job: Mapping[str, Any]) -> str:
    """A job's state as the list shows it: with how often it was preempted, if it was
    (kept once the job ends, as in the dashboard's list)."""
    n = job.get("preemptions") or 0
    return f"{job['state']} (preempted {n}×)" if n else str(job["state"])


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
            ("owner", str(job.get("owner") or "-")), ("priority", str(job["priority"])), ("tags", ", ".join(job["tags"]) or "-"),
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
    import threading

    lock = threading.Lock()
    ended: dict[str, Any] = {}

    def write(text: str) -> None:
        with lock:
            sys.stdout.write(text)
            sys.stdout.flush()

    # reports too: a job that only calls report() (and prints nothing) is followed as well
    reports = threading.Thread(target=_follow_reports, args=(conn, a.job_id, write, ended),
                               name="tandem-follow-reports", daemon=True)
    try:
        with conn.http.stream("GET", f"/api/jobs/{a.job_id}/logs", params=params,
                              timeout=conn._httpx.Timeout(10.0, read=None)) as r:
            conn.check(r)
            reports.start()
            for chunk in r.iter_text():
                write(chunk)
        reports.join(timeout=10)
    except conn._httpx.TransportError as e:
        raise conn.unreachable(e) from None
    except KeyboardInterrupt:
        return 130
    if ended.get("state"):
        write(f"job {a.job_id} {ended['state']}"
              + (f": {ended['error']}" if ended.get("error") else "") + "\n")
    return 0


def _follow_reports(conn: Any, job_id: str, write: Any, ended: dict[str, object]) -> None:
    """Writes each report of the job as a ``(report N) key=value ...`` line until it ends."""
    from tandem.jobs.client import parse_sse
    from tandem.train.progress import format_metrics

    try:
        with conn.http.stream("GET", f"/api/jobs/{job_id}/events", params={"after_seq": -1},
                              timeout=conn._httpx.Timeout(10.0, read=None)) as r:
            conn.check(r)
            for event, data in parse_sse(r.iter_lines()):
                body = json.loads(data)
                if event == "reports":
                    first = int(body.get("first_seq", 0))
                    write("".join(f"(report {first + i + 1}) {format_metrics(row)}\n"
                                  for i, row in enumerate(body.get("rows") or [])))
                elif event == "end":
                    ended.update(state=body.get("state"), error=body.get("error"))
                    return
    except Exception:  # noqa: BLE001 - the logs go on; only the report lines stop
        return


def cmd_jobs_stop(a: argparse.Namespace) -> int:
    job = _conn(a).json("POST", f"/api/jobs/{a.job_id}/stop", params={"by": "cli"})
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
    require_extras("server", what="`tandem dashboard`")
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
    sock.listen(128)  # a browser (or script) that follows the link at once waits, not refused
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


# --------------------------------------------------------------------------- models, serve
# (the model registry and serving; a self-contained block)


def _models_backend(a: argparse.Namespace) -> Any:
    """The train server's registry, found as ``tandem jobs`` finds it (--address,
    $TANDEM_ADDRESS, or the local server of ``~/.tandem/server.json`` when it answers);
    with none of them (or ``TANDEM_ADDRESS=local``), the local registry."""
    from tandem.jobs.client.discovery import env_address, find_local_server, wants_embedded

    if a.address or env_address():
        from tandem.model.registry import RemoteRegistry

        return RemoteRegistry(_conn(a))
    found = None if wants_embedded() else find_local_server()
    if found is not None:
        from tandem.jobs.client import ServerConnection
        from tandem.model.registry import RemoteRegistry

        return RemoteRegistry(ServerConnection(found.url, a.token or found.token))
    from tandem.model.registry import local_registry

    return local_registry()


def _age(t: float | None) -> str:
    return _when(t)


def cmd_models_list(a: argparse.Namespace) -> int:
    backend = _models_backend(a)
    if a.name is None:
        rows = backend.names()
        if a.json:
            _print_json(rows)
            return 0
        if not rows:
            print(f"no models registered in {backend.where()} (register one with "
                  f"model.put(trained, name=...))")
            return 0
        for r in rows:
            aliases = ", ".join(f"{k}->{v}" for k, v in sorted(r["aliases"].items()))
            print(f"{r['name']}  versions={r['versions']}  latest={r['latest']}  "
                  f"updated={_age(r['updated'])}" + (f"  aliases: {aliases}" if aliases else ""))
        return 0
    versions = [v.to_dict() for v in backend.versions(a.name)]
    if a.json:
        _print_json(versions)
        return 0
    for v in versions:
        lin = v["lineage"]
        src = lin.get("run_path") or lin.get("checkpoint") or "-"
        metrics = ", ".join(f"{k}={val:.4g}" if isinstance(val, float) else f"{k}={val}"
                            for k, val in list(v["metrics"].items())[:4])
        print(f"{a.name}@{v['version']}  created={_age(v['created'])}  "
              f"aliases={','.join(v['aliases']) or '-'}  {metrics or 'no metrics'}  from {src}")
    return 0


def cmd_models_show(a: argparse.Namespace) -> int:
    record = _models_backend(a).resolve(a.ref).to_dict()
    if a.json:
        _print_json(record)
        return 0
    print(f"{record['name']}@{record['version']}"
          + (f"  (aliases: {', '.join(record['aliases'])})" if record["aliases"] else ""))
    cls = record["model_class"]
    print(f"  class:       {cls.get('module')}.{cls.get('qualname')}")
    print(f"  created:     {_when(record['created'])} by {record['lineage'].get('user', '?')} "
          f"on {record['lineage'].get('host', '?')}")
    for key in ("config", "metrics", "lineage", "environment", "tags"):
        value = {k: v for k, v in record[key].items() if key != "lineage" or
                 k not in ("user", "host", "time")}
        if value:
            print(f"  {key + ':':<12} {json.dumps(value, default=str)}")
    print(f"  files:       {record['location']}")
    return 0


def cmd_models_alias(a: argparse.Namespace) -> int:
    record = _models_backend(a).set_alias(a.name, a.alias, a.version)
    print(f"{a.name}@{a.alias} -> version {record.version}")
    return 0


def cmd_models_delete(a: argparse.Namespace) -> int:
    from tandem.model.registry import ModelRef

    ref = ModelRef.parse(a.ref)
    if ref.version is None:
        print(f"error: give the version to delete, e.g. `tandem models delete {ref.name}@2` "
              f"(versions: `tandem models list {ref.name}`)", file=sys.stderr)
        return 2
    _models_backend(a).delete(ref.name, ref.version)
    print(f"deleted {ref}")
    return 0


def cmd_serve(a: argparse.Namespace) -> int:
    from tandem.jobs import runtime
    from tandem.jobs.client import RemoteJobService
    from tandem.jobs.client.discovery import env_address

    address = a.address or env_address()
    if address:
        import tandem

        tandem.init(address=address, token=a.token)
    from tandem import model

    settings: dict[str, Any] = {"port": a.port, "host": a.host, "num_replicas": a.replicas,
                                "max_batch_size": a.max_batch_size,
                                "batch_wait_ms": a.batch_wait_ms, "expose": a.expose}
    if a.route_prefix is not None:
        settings["route_prefix"] = a.route_prefix
    if a.num_cpus is not None:
        settings["resources_per_replica"] = {"CPU": a.num_cpus}
    if a.num_gpus:
        settings["num_gpus"] = a.num_gpus
    handle = model.serve(a.ref, serve_settings=settings)
    remote = isinstance(runtime.current_service(), RemoteJobService)  # a local server too
    if a.json:
        _print_json({"url": handle.url, "job_id": handle.job_id})
    else:
        print(f"serving {a.ref} at {handle.url}  (job {handle.job_id})")
        print(f"  POST {handle.url}/predict  {{\"inputs\": [...]}}")
        if handle.api_key is not None:
            print("  exposed: requests need 'Authorization: Bearer <key>' ("
                  + ("the train server's token)" if remote else f"key {handle.api_key})"))
    sys.stdout.flush()
    if remote:
        if not a.json:
            print(f"  it runs on the train server; stop it with `tandem jobs stop "
                  f"{handle.job_id}`")
        return 0
    print("  press Ctrl-C to stop")
    sys.stdout.flush()
    import signal

    def _term(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _term)
    try:
        handle.wait()
    except KeyboardInterrupt:
        handle.stop()
    return 0


def cmd_users_add(a: argparse.Namespace) -> int:
    body = {"name": a.name, "role": a.role}
    if a.group:
        body["group"] = a.group
    out = _conn(a).json("POST", "/api/users", json=body)
    if a.json:
        _print_json(out)
    else:
        group = f", group {out['group']}" if out.get("group") else ""
        print(f"user {out['name']} ({out['role']}{group}) added; its token, shown only now:")
        print(out["token"])
        print("(give it to them: TANDEM_TOKEN=... or tandem.init(token=...); the dashboard "
              "takes it at /login)", file=sys.stderr)
    return 0


def cmd_users_list(a: argparse.Namespace) -> int:
    users = _conn(a).json("GET", "/api/users")["users"]
    if a.json:
        _print_json(users)
        return 0
    from rich.table import Table

    t = Table(box=None, header_style="bold")
    for col in ("NAME", "ROLE", "GROUP", "ADDED", "BY", "REVOKED"):
        t.add_column(col, no_wrap=True, overflow="ignore")
    for u in users:
        t.add_row(u["name"], u["role"], u.get("group") or "-", _when(u["created_at"]),
                  u["created_by"] or "-", _when(u["revoked_at"]) if u["revoked_at"] else "")
    _console().print(t)
    return 0


def cmd_users_revoke(a: argparse.Namespace) -> int:
    out = _conn(a).json("DELETE", f"/api/users/{a.name}")
    print(json.dumps(out) if a.json else f"user {a.name}: token revoked")
    return 0


def cmd_users_set_role(a: argparse.Namespace) -> int:
    out = _conn(a).json("PUT", f"/api/users/{a.name}/role", json={"role": a.role})
    print(json.dumps(out) if a.json else f"user {a.name}: {out['was']} -> {out['role']}")
    return 0


def cmd_users_set_group(a: argparse.Namespace) -> int:
    if a.group is None:
        out = _conn(a).json("DELETE", f"/api/users/{a.name}/group")
    else:
        out = _conn(a).json("PUT", f"/api/users/{a.name}/group", json={"group": a.group})
    print(json.dumps(out) if a.json else
          f"user {a.name}: " + (f"group {a.group}" if a.group else "in no group"))
    return 0


def cmd_audit(a: argparse.Namespace) -> int:
    params: dict[str, Any] = {"limit": a.limit}
    if a.user:
        params["user"] = a.user
    if a.action:
        params["action"] = a.action
    entries = _conn(a).json("GET", "/api/audit", params=params)["entries"]
    if a.json:
        _print_json(entries)
        return 0
    from rich.table import Table

    t = Table(box=None, header_style="bold")
    for col in ("WHEN", "USER", "ACTION", "OBJECT", "OUTCOME", "DETAIL"):
        t.add_column(col, no_wrap=True, overflow="ignore")
    for e in entries:
        t.add_row(_when(e["time"]), e["user"], e["action"], e["target"] or "-",
                  f"{e['outcome']} ({e['status']})", (e["detail"] or "")[:80])
    _console().print(t)
    if not entries:
        print("(no entries)")
    return 0


def _print_quotas(out: dict[str, Any], as_json: bool) -> None:
    if as_json:
        _print_json(out)
        return
    quotas = out.get("quotas") or {}
    for name, q in quotas.items():
        print(f"{name}: " + ", ".join(f"{k}={v:g}" for k, v in q.items()))
    groups = {g: v for g, v in (out.get("groups") or {}).items() if v.get("quota")}
    for name, g in groups.items():
        print(f"group {name} ({', '.join(g['members']) or 'no members'}): "
              + ", ".join(f"{k}={v:g}" for k, v in g["quota"].items()))
    if not quotas and not groups:
        print("(no quotas)")


def cmd_quotas_list(a: argparse.Namespace) -> int:
    conn = _conn(a)
    out = conn.json("GET", "/api/quotas")
    out["groups"] = conn.json("GET", "/api/groups")["groups"]
    _print_quotas(out, a.json)
    return 0


def cmd_quotas_set(a: argparse.Namespace) -> int:
    body = {k: v for k, v in (("cpus", a.cpus), ("gpus", a.gpus), ("memory", a.memory),
                              ("queued_jobs", a.queued_jobs)) if v is not None}
    if not body:
        print("error: give at least one of --cpus, --gpus, --memory, --queued-jobs",
              file=sys.stderr)
        return 2
    if (a.name is None) == (a.group is None):
        print("error: give a user NAME ('*': everyone else) or --group GROUP, not both",
              file=sys.stderr)
        return 2
    path = f"/api/groups/{a.group}/quota" if a.group else f"/api/quotas/{a.name}"
    _print_quotas(_conn(a).json("PUT", path, json=body), a.json)
    return 0


def cmd_quotas_delete(a: argparse.Namespace) -> int:
    if (a.name is None) == (a.group is None):
        print("error: give a user NAME or --group GROUP, not both", file=sys.stderr)
        return 2
    path = f"/api/groups/{a.group}/quota" if a.group else f"/api/quotas/{a.name}"
    _print_quotas(_conn(a).json("DELETE", path), a.json)
    return 0


def add_user_commands(sub: Any, client: argparse.ArgumentParser) -> None:
    users = sub.add_parser("users", help="users of the train server (admin)").add_subparsers(
        dest="users_command", required=True,
        metavar="add|list|revoke|set-role|set-group|leave-group")
    add = users.add_parser("add", parents=[client], help="add a user; prints its token once")
    add.add_argument("name")
    add.add_argument("--role", choices=["admin", "member", "viewer"], default="member")
    add.add_argument("--group", default=None, help="the user's group (group quotas, fair "
                     "share across groups)")
    add.set_defaults(fn=cmd_users_add)
    sr = users.add_parser("set-role", parents=[client],
                          help="change a user's role in place (its token stays)")
    sr.add_argument("name")
    sr.add_argument("role", choices=["admin", "member", "viewer"])
    sr.set_defaults(fn=cmd_users_set_role)
    sg = users.add_parser("set-group", parents=[client], help="put a user in a group")
    sg.add_argument("name")
    sg.add_argument("group")
    sg.set_defaults(fn=cmd_users_set_group)
    lg = users.add_parser("leave-group", parents=[client], help="take a user out of its group")
    lg.add_argument("name")
    lg.set_defaults(fn=cmd_users_set_group, group=None)
    users.add_parser("list", parents=[client], help="users and roles").set_defaults(
        fn=cmd_users_list)
    rv = users.add_parser("revoke", parents=[client], help="revoke a user's token")
    rv.add_argument("name")
    rv.set_defaults(fn=cmd_users_revoke)
    audit = sub.add_parser("audit", parents=[client], help="the audit log, newest first (admin)")
    audit.add_argument("--user", default=None)
    audit.add_argument("--action", default=None, help="e.g. jobs.stop, models.alias")
    audit.add_argument("--limit", type=int, default=50)
    audit.set_defaults(fn=cmd_audit)
    quotas = sub.add_parser("quotas", help="per-user quotas (set: admin)").add_subparsers(
        dest="quotas_command", required=True, metavar="list|set|delete")
    quotas.add_parser("list", parents=[client], help="quotas in force").set_defaults(
        fn=cmd_quotas_list)
    qs = quotas.add_parser("set", parents=[client],
                           help="set NAME's quota ('*': everyone else), or --group G's")
    qs.add_argument("name", nargs="?", default=None)
    qs.add_argument("--group", default=None, help="set the group's quota (its members "
                    "together) instead of a user's")
    qs.add_argument("--cpus", type=float, default=None)
    qs.add_argument("--gpus", type=float, default=None)
    qs.add_argument("--memory", type=float, default=None, help="bytes")
    qs.add_argument("--queued-jobs", type=int, default=None)
    qs.set_defaults(fn=cmd_quotas_set)
    qd = quotas.add_parser("delete", parents=[client], help="remove NAME's (or --group G's) quota")
    qd.add_argument("name", nargs="?", default=None)
    qd.add_argument("--group", default=None)
    qd.set_defaults(fn=cmd_quotas_delete)


def add_model_commands(sub: Any, client: argparse.ArgumentParser) -> None:
    models = sub.add_parser("models", help="the model registry").add_subparsers(
        dest="models_command", required=True, metavar="list|show|alias|delete")
    ls = models.add_parser("list", parents=[client], help="registered models, or one's versions")
    ls.add_argument("name", nargs="?", default=None)
    ls.set_defaults(fn=cmd_models_list)
    show = models.add_parser("show", parents=[client], help="one version: NAME, NAME@V, NAME@ALIAS")
    show.add_argument("ref")
    show.set_defaults(fn=cmd_models_show)
    al = models.add_parser("alias", parents=[client], help="point NAME@ALIAS at a version")
    al.add_argument("name")
    al.add_argument("alias")
    al.add_argument("version", type=int)
    al.set_defaults(fn=cmd_models_alias)
    rm = models.add_parser("delete", parents=[client], help="delete NAME@V (not while aliased)")
    rm.add_argument("ref")
    rm.set_defaults(fn=cmd_models_delete)

    serve = sub.add_parser("serve", parents=[client],
                           help="serve a registered model over HTTP: NAME, NAME@V, NAME@ALIAS")
    serve.add_argument("ref")
    serve.add_argument("--port", type=int, default=8000, help="default 8000; 0 = any free port")
    serve.add_argument("--host", default="127.0.0.1",
                       help="another address than loopback needs --expose")
    serve.add_argument("--expose", action="store_true",
                       help="serve on a --host other machines reach; requests then need a key")
    serve.add_argument("--replicas", type=int, default=1)
    serve.add_argument("--max-batch-size", type=int, default=1)
    serve.add_argument("--batch-wait-ms", type=float, default=0.0)
    serve.add_argument("--route-prefix", default=None, help="default /NAME")
    serve.add_argument("--num-cpus", type=float, default=None, help="CPUs per replica (1)")
    serve.add_argument("--num-gpus", type=float, default=0,
                       help="GPUs per replica (0; 0.5 shares one)")
    serve.set_defaults(fn=cmd_serve)


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
    stop = server.add_parser("stop", parents=[common], help="stop the local train server")
    stop.add_argument("--storage", default=os.path.join("~", ".tandem", "server"),
                      help="the server's folder, where it keeps its pid file (used when "
                           "~/.tandem/server.json is missing or damaged)")
    stop.set_defaults(fn=cmd_server_stop)
    server.add_parser("status", parents=[client], help="is a server running?").set_defaults(
        fn=cmd_server_status)

    warm = sub.add_parser("warm", help="a warm host: workers start with torch imported in "
                          "every new program").add_subparsers(
        dest="warm_command", required=True, metavar="start|stop|status")
    ws = warm.add_parser("start", parents=[common],
                         help="start a warm host for this Python and tandem (or find it)")
    ws.add_argument("--preload", action="append", default=[], metavar="MODULE",
                    help="import MODULE in the host now (repeatable or comma-separated: "
                         "--preload torch,sklearn)")
    ws.add_argument("--idle-timeout", type=float, default=900.0, metavar="S",
                    help="exit after S seconds with no program connected (default 900)")
    ws.add_argument("--max-pss-mb", type=float, default=None, metavar="M",
                    help="learn no more imports past M MiB of PSS (default "
                         "$TANDEM_WARM_POOL_MB or 500)")
    ws.set_defaults(fn=cmd_warm_start)
    warm.add_parser("status", parents=[common], help="the warm hosts running").set_defaults(
        fn=cmd_warm_status)
    warm.add_parser("stop", parents=[common], help="stop every warm host of this user").set_defaults(
        fn=cmd_warm_stop)

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
    add_model_commands(sub, client)  # tandem models ..., tandem serve
    add_user_commands(sub, client)  # tandem users ..., tandem audit, tandem quotas ...
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
