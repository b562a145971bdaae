"""The serving front of a process: one asyncio loop on its own thread, and one HTTP server
(uvicorn) per address, shared by every model this process serves (the process that called
``model.serve``, or a train server).

Deployments on one address are told apart by their route prefix: a second deployment whose
port is unset (or names the port a deployment of this process listens on already) joins
that server instead of starting its own, so ``/digits/predict`` and ``/mnist/predict``
answer on one port, as Ray Serve's proxy does. The server stops, and its port is free
again, when its last deployment stops; the loop stays for the next one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import importlib.util
import socket
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from tandem._core.errors import ConfigError
from tandem.model.serve._front import HTTPError, ServeApp, _dumps


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: a free port).

    Raises:
        ConfigError: the port is in use (or the address is not this machine's).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {host} is in use by another program, so the model cannot be "
                f"served there. Pick another port (serve_settings={{'port': ...}} or "
                f"`tandem serve ... --port P`), leave the port unset for a free one, or stop "
                f"what listens on {port}.") from None
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}. Give a host "
                          f"address of this machine, e.g. 127.0.0.1 (with expose=True, an "
                          f"address other machines reach).") from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover
        return asyncio.new_event_loop()


class Listener:
    """One listening socket and the deployments answering on it (by route prefix)."""

    def __init__(self, host: str, port: int, sock: socket.socket, default: bool) -> None:
        self.host = host
        self.port = port
        self.sock = sock
        self.default = default  # the one that deployments without a port share
        self.routes: dict[str, ServeApp | None] = {}  # prefix -> its app (None: reserved)
        self.owners: dict[str, str] = {}  # prefix -> the serving job's id
        self.server: Any = None
        self.serving: concurrent.futures.Future[None] | None = None  # the server's run
        self.starts = 0  # times an HTTP server was started on it (tests: once)

    async def __call__(self, scope: dict, receive: Callable[[], Awaitable[dict]],
                       send: Callable[[dict], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        best: tuple[str, ServeApp] | None = None
        for prefix, app in self.routes.items():
            if app is None:
                continue
            if (prefix == "" or path == prefix or path.startswith(prefix + "/")) and \
                    (best is None or len(prefix) > len(best[0])):
                best = (prefix, app)
        if best is not None:
            await best[1](scope, receive, send)
            return
        status, body = self._not_found(scope, path)
        data = _dumps(body)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})


    def _not_found(self, scope: dict, path: str) -> tuple[int, dict[str, str]]:
        """404 listing the routes, to a client holding the key of an exposed model on this
        listener (401 otherwise, as that model would answer): no route names leak."""
        keyed = [app for app in self.routes.values() if app is not None and app._key]
        if keyed:
            for app in keyed:
                try:
                    app._check_key(scope)
                    break
                except HTTPError:
                    continue
            else:
                try:
                    keyed[0]._check_key(scope)
                except HTTPError as e:
                    return e.status, {"detail": e.detail}
        shown = "; ".join(f"{p or '/'} ({self.owners.get(p, '?')})" for p in sorted(self.routes))
        return 404, {"detail": f"no route {path}; this server serves: {shown}."}


class SharedFront:
    """The process's serving loop and listeners (``front()`` returns the one instance)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.listeners: dict[tuple[str, int], Listener] = {}

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = _new_loop()
                threading.Thread(target=loop.run_forever, name="tandem-serve-loop",
                                 daemon=True).start()
                self._loop = loop
            return self._loop

    def reserve(self, host: str, port: int | None, prefix: str, owner: str) -> Listener:
        """Where a deployment will answer: the listener of this address (the shared one
        when ``port`` is None), bound now if there is none.

        Raises:
            ConfigError: the prefix is served there already, or the port is taken by
                another program.
        """
        with self._lock:
            found = None
            for lst in self.listeners.values():
                if lst.host == host and ((port is None and lst.default)
                                         or (port is not None and lst.port == port)):
                    found = lst
                    break
            if found is None:
                sock = bind_socket(host, port or 0)
                bound = int(sock.getsockname()[1])
                found = Listener(host, bound, sock, default=port is None)
                self.listeners[(host, bound)] = found
            if prefix in found.routes:
                raise ConfigError(
                    f"route_prefix {prefix or '/'!r} is served already on {host}:{found.port} "
                    f"by job {found.owners.get(prefix)}; give this deployment another "
                    f"route_prefix (serve_settings={{'route_prefix': '/other'}}) or port, or "
                    f"stop the other first.")
            found.routes[prefix] = None
            found.owners[prefix] = owner
            return found

    def attach(self, lst: Listener, prefix: str, app: ServeApp) -> concurrent.futures.Future[None]:
        """Routes ``prefix`` to ``app``; starts the listener's HTTP server if it has none.
        Returns the server's future (done when it ended)."""
        import uvicorn

        loop = self.loop
        with self._lock:
            lst.routes[prefix] = app
            if lst.serving is None or lst.serving.done():
                config = uvicorn.Config(lst, lifespan="off", log_level="warning",
                                        access_log=False,
                                        http="httptools" if _has("httptools") else "h11",
                                        timeout_keep_alive=30, backlog=2048)
                lst.server = uvicorn.Server(config)
                lst.serving = asyncio.run_coroutine_threadsafe(
                    lst.server.serve(sockets=[lst.sock]), loop)
                lst.starts += 1
            return lst.serving

    def release(self, lst: Listener, prefix: str) -> None:
        """``prefix`` answers no more; the last one out stops the server and frees the port."""
        with self._lock:
            lst.routes.pop(prefix, None)
            lst.owners.pop(prefix, None)
            if lst.routes:
                return
            self.listeners.pop((lst.host, lst.port), None)
            server, serving = lst.server, lst.serving
            lst.server = lst.serving = None
        if server is not None and serving is not None:
            server.should_exit = True
            try:
                serving.result(timeout=5)
            except Exception:  # noqa: BLE001, S110 - stopping anyway
                pass
        lst.sock.close()


_FRONT = SharedFront()


def front() -> SharedFront:
    """This process's serving front."""
    return _FRONT
