"""pytest plugin: a real, throwaway PostgreSQL server for tests.

Register it with ``pytest_plugins = ["tests.conftest_postgres"]`` (or the module name on
``sys.path``). Fixtures:

* ``postgres_url`` (session): ``postgresql+psycopg://postgres@127.0.0.1:<port>/tandem_test``
  on a server this plugin starts: ``initdb`` in a temp dir, ``pg_ctl start`` on a free
  loopback port with its unix socket in the same temp dir, ``fsync=off``. The server is
  stopped and the temp dir removed at session end (also at interpreter exit if the
  session is torn down abnormally).
* ``postgres_database_url`` (function): a fresh, empty database on that server, dropped
  after the test. Use it when tests must not see each other's tables.

Where the binaries come from: ``$TANDEM_PG_BIN`` (a directory with ``initdb`` and
``pg_ctl``), else ``pg_ctl`` on ``PATH``, else the newest ``/usr/lib/postgresql/<ver>/bin``.
``.ci/install_postgres.sh`` installs them (and psycopg). PostgreSQL refuses to run as
root: when the tests run as root, the server runs as the unprivileged OS user
``$TANDEM_PG_USER`` (default ``postgres``, which Debian's package creates) through
``runuser``, and the temp dir is owned by that user.

``$TANDEM_TEST_POSTGRES_URL`` skips all that and uses an existing server (its database
must allow ``CREATE DATABASE`` for ``postgres_database_url``).

When PostgreSQL or psycopg is missing the fixtures skip, naming ``.ci/install_postgres.sh``;
with ``$CI`` set they fail instead, so CI never silently drops the PostgreSQL tests.
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

INSTALL_HINT = (
    "run `bash .ci/install_postgres.sh` (installs Debian's postgresql package and psycopg)"
)


def _unavailable(reason: str) -> None:
    """Skips the test, or fails it loudly when running in CI."""
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL tests cannot run in CI: {reason}; {INSTALL_HINT}", pytrace=False)
    pytest.skip(f"PostgreSQL unavailable: {reason}; {INSTALL_HINT}")


def find_pg_bin() -> str | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or None."""
    candidates: list[str] = []
    if os.environ.get("TANDEM_PG_BIN"):
        candidates.append(os.environ["TANDEM_PG_BIN"])
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(os.path.dirname(os.path.realpath(on_path)))
        candidates.append(os.path.dirname(on_path))

    def version(path: str) -> tuple[int, ...]:
        m = re.search(r"/postgresql/([\d.]+)/bin", path)
        return tuple(int(p) for p in m.group(1).split(".")) if m else (0,)

    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)
    for d in candidates:
        if all(
            os.access(os.path.join(d, exe), os.X_OK) for exe in ("initdb", "pg_ctl", "postgres")
        ):
            return d
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PostgresServer:
    """A PostgreSQL server started by this plugin."""

    bin_dir: str
    base_dir: str
    port: int
    run_as: str | None  # OS user the server runs as when we are root
    stopped: bool = field(default=False)
    options: str = ""  # the postgres options it was started with

    def crash(self) -> None:
        """Stops the server at once, as a crash or a lost database host would
        (``pg_ctl -m immediate``); ``start_again`` brings it back on the same port."""
        res = self.run("pg_ctl", "-D", self.data_dir, "-m", "immediate", "-w", "-t", "20", "stop")
        if res.returncode != 0:
            raise RuntimeError(f"pg_ctl stop failed:\n{res.stdout}\n{res.stderr}")

    def start_again(self) -> None:
        res = self.run("pg_ctl", "-D", self.data_dir, "-l", self.log_path, "-w", "-t", "60",
                       "-o", self.options, "start", timeout=90)
        if res.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed:\n{res.stdout}\n{res.stderr}\n"
                               f"{self.log_tail()}")

    @property
    def data_dir(self) -> str:
        return os.path.join(self.base_dir, "data")

    @property
    def log_path(self) -> str:
        return os.path.join(self.base_dir, "server.log")

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def conninfo(self, database: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={database}"

    def command(self, exe: str, *args: str) -> list[str]:
        cmd = [os.path.join(self.bin_dir, exe), *args]
        if self.run_as is not None:
            cmd = ["runuser", "-u", self.run_as, "--", *cmd]
        return cmd

    def run(self, exe: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(exe, *args),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.base_dir,
            check=False,
        )

    def log_tail(self) -> str:
        try:
            with open(self.log_path) as f:
                return f.read()[-2000:]
        except OSError:
            return "(no server log)"

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        try:
            res = self.run("pg_ctl", "-D", self.data_dir, "-m", "fast", "-w", "-t", "20", "stop")
            if res.returncode != 0:
                self.run("pg_ctl", "-D", self.data_dir, "-m", "immediate", "-w", "-t", "10", "stop")
        except (OSError, subprocess.SubprocessError):
            pass
        finally:
            self._kill_leftover()
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def _kill_leftover(self) -> None:
        # Last resort: the postmaster's pid is the first line of postmaster.pid.
        try:
            with open(os.path.join(self.data_dir, "postmaster.pid")) as f:
                pid = int(f.readline().strip())
        except (OSError, ValueError):
            return
        try:
            os.kill(pid, signal.SIGQUIT)
        except ProcessLookupError:
            return
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def start_postgres(durable_commits: bool = False) -> PostgresServer:
    """Starts a throwaway server. Skips/fails (see module docstring) when impossible.

    ``durable_commits``: a commit is acknowledged only once it is in the WAL
    (``synchronous_commit=on``), as on a production database; by default commits are
    asynchronous (fast), so a crash (``crash()``) may lose the last acknowledged ones.
    """
    bin_dir = find_pg_bin()
    if bin_dir is None:
        _unavailable(
            "initdb/pg_ctl not found on PATH, in $TANDEM_PG_BIN or /usr/lib/postgresql/*/bin"
        )
        raise AssertionError("unreachable")
    run_as: str | None = None
    if os.geteuid() == 0:
        run_as = os.environ.get("TANDEM_PG_USER", "postgres")
        try:
            pw = pwd.getpwnam(run_as)
        except KeyError:
            _unavailable(
                f"tests run as root and PostgreSQL refuses to run as root, but the OS user "
                f"{run_as!r} to run it as does not exist (set $TANDEM_PG_USER to another user)"
            )
            raise AssertionError("unreachable") from None
        if shutil.which("runuser") is None:
            _unavailable("tests run as root and `runuser` (util-linux) is missing")
    # /tmp, not pytest's tmp dirs: those are 0700 root-owned, so the server user could
    # not reach them.
    base_dir = tempfile.mkdtemp(prefix="tandem-pg-", dir="/tmp" if run_as else None)
    if run_as is not None:
        os.chown(base_dir, pw.pw_uid, pw.pw_gid)
    os.chmod(base_dir, 0o700)
    server = PostgresServer(bin_dir=bin_dir, base_dir=base_dir, port=0, run_as=run_as)
    try:
        res = server.run(
            "initdb",
            "-D",
            server.data_dir,
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
            timeout=120,
        )
        if res.returncode != 0:
            raise RuntimeError(f"initdb failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
        last = ""
        for _attempt in range(3):  # a free port can be taken between probe and bind
            server.port = _free_port()
            options = " ".join(
                [
                    "-c listen_addresses=127.0.0.1",
                    f"-c port={server.port}",
                    f"-c unix_socket_directories={base_dir}",
                    "-c fsync=off",
                    f"-c synchronous_commit={'on' if durable_commits else 'off'}",
                    "-c full_page_writes=off",
                    "-c max_connections=200",
                ]
            )
            server.options = options
            res = server.run(
                "pg_ctl",
                "-D",
                server.data_dir,
                "-l",
                server.log_path,
                "-w",
                "-t",
                "60",
                "-o",
                options,
                "start",
                timeout=90,
            )
            if res.returncode == 0:
                break
            last = f"{res.stdout}\n{res.stderr}\n{server.log_tail()}"
        else:
            raise RuntimeError(f"pg_ctl start failed 3 times; last output:\n{last}")
    except BaseException:
        server.stop()
        raise
    atexit.register(server.stop)  # in case the session is not torn down normally
    return server


def _psycopg():  # type: ignore[no-untyped-def]
    try:
        import psycopg
    except ImportError:
        _unavailable("the driver psycopg 3 is not installed (pip install 'psycopg[binary]')")
        raise AssertionError("unreachable") from None
    return psycopg


def _admin_conninfo(url: str) -> str:
    """libpq URI for a SQLAlchemy-style URL (driver suffix dropped)."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _with_database(url: str, database: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(database=database).render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def _postgres_server_url() -> Iterator[str]:
    """URL (to the ``postgres`` database) of the session's server."""
    psycopg = _psycopg()
    external = os.environ.get("TANDEM_TEST_POSTGRES_URL")
    if external:
        yield external
        return
    server = start_postgres()
    try:
        # Fail early and clearly if the server is up but unreachable.
        with psycopg.connect(server.conninfo(), connect_timeout=10):
            pass
        yield server.url("postgres")
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_url(_postgres_server_url: str) -> str:
    """SQLAlchemy URL of database ``tandem_test`` on a real PostgreSQL server (session-wide)."""
    psycopg = _psycopg()
    if os.environ.get("TANDEM_TEST_POSTGRES_URL"):
        return _postgres_server_url
    with psycopg.connect(_admin_conninfo(_postgres_server_url), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = 'tandem_test'").fetchone()
        if not exists:
            conn.execute("CREATE DATABASE tandem_test")
    return _with_database(_postgres_server_url, "tandem_test")


@pytest.fixture
def postgres_database_url(_postgres_server_url: str) -> Iterator[str]:
    """SQLAlchemy URL of a fresh, empty database, dropped (connections forced out) after the test."""
    psycopg = _psycopg()
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = _admin_conninfo(_postgres_server_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(_postgres_server_url, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
