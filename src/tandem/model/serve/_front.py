"""The front of a served model: an ASGI app (run by uvicorn) and the batcher that hands
requests to the replicas. Runs on one asyncio loop in the process running the served job.

Requests queue in arrival order; a batch takes up to ``max_batch_size`` inputs (waiting at
most ``batch_wait_ms`` after its first request for more) and goes to a replica that has
nothing in flight. Each request gets its own slice of the outputs, in order. A replica
that dies gives its batch back to the queue (front of the line; a request is tried on at
most three replicas before it is answered 503), so an accepted request is always answered.
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import itertools
import json
import math
from collections.abc import Awaitable, Callable
from typing import Any

_orjson: Any
try:  # optional, faster JSON
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None

Send = Callable[[dict], Awaitable[None]]
MAX_TRIES = 3


def _dumps(obj: object) -> bytes:
    if _orjson is not None:
        try:
            return _orjson.dumps(obj, option=_orjson.OPT_SERIALIZE_NUMPY)
        except TypeError:
            pass
    try:
        return json.dumps(obj, default=str, allow_nan=False).encode()
    except ValueError:  # NaN or an infinity in a model's output: JSON has no such numbers
        return json.dumps(_finite_or_null(obj), default=str, allow_nan=False).encode()


def _finite_or_null(obj: object) -> object:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, list):
        return [_finite_or_null(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _finite_or_null(v) for k, v in obj.items()}
    return obj


def _no_constant(name: str) -> object:
    raise HTTPError(422, f"the body holds {name}, which is not a number JSON has; send "
                         f"finite numbers only.")


def _loads(data: bytes) -> object:
    if _orjson is not None:
        try:
            return _orjson.loads(data)
        except ValueError:
            pass  # json names the problem (NaN, Infinity: 422)
    return json.loads(data, parse_constant=_no_constant)


def _short(value: object) -> str:
    """A short, safe rendering of part of a request (never recursive)."""
    if isinstance(value, (list, dict)):
        return f"a JSON {'array' if isinstance(value, list) else 'object'} of {len(value)}"
    return repr(value)[:100]


def _find_bool(inputs: list[object]) -> str | None:
    """Where the first boolean in the inputs is (``inputs[3][0]``), or None."""
    todo: list[tuple[Any, str]] = [(x, f"inputs[{i}]") for i, x in enumerate(inputs)]
    todo.reverse()
    while todo:
        x, at = todo.pop()
        if isinstance(x, bool):
            return at
        if isinstance(x, list):
            todo.extend(reversed([(v, f"{at}[{j}]") for j, v in enumerate(x)]))
        elif isinstance(x, dict):
            todo.extend((v, f"{at}[{k!r}]") for k, v in x.items())
    return None


class HTTPError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class _Request:
    __slots__ = ("arrived", "future", "inputs", "offset", "tries")

    def __init__(self, inputs: list[Any], future: asyncio.Future, arrived: float,
                 offset: int = 0) -> None:
        self.inputs = inputs
        self.future = future
        self.tries = 0
        self.arrived = arrived
        self.offset = offset  # where these inputs start in the HTTP request (when split)


class ReplicaSlot:
    """The front's view of one replica."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.worker: Any = None
        self.generation = 0
        self.ready = False
        self.inflight: dict[int, list[_Request]] = {}
        self.pid: int | None = None
        self.restarts = 0
        self.device: str | None = None  # where its model runs ("cpu", "cuda:0")
        self.warm = False  # it served this model before: its process and weights reused


class Front:
    """Batcher + replica bookkeeping. Every method runs on the front's loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, num_replicas: int, max_batch_size: int,
                 batch_wait_ms: float, request_timeout_s: float, max_queued: int,
                 on_replica_exit: Callable[[int, int, str | None], None]) -> None:
        self.loop = loop
        self.replicas = [ReplicaSlot(i) for i in range(num_replicas)]
        self.max_batch = max_batch_size
        self.wait_s = batch_wait_ms / 1000.0
        self.timeout_s = request_timeout_s
        self.max_queued = max_queued
        self.on_replica_exit = on_replica_exit
        self.queue: collections.deque[_Request] = collections.deque()
        self.queued_inputs = 0
        self._arrived = asyncio.Event()
        self._full = asyncio.Event()
        self._slot_free = asyncio.Event()
        self._ids = itertools.count()
        self.item_shape: list[int] | None = None
        self.answered = 0
        self.batches = 0
        self.largest_batch = 0
        self.closed = False  # stopping: requests are answered 503 at once
        self.task = loop.create_task(self._dispatch())

    # -- from HTTP ------------------------------------------------------------------------
    async def predict(self, inputs: list[object]) -> list[Any]:
        """The outputs for ``inputs``; a request of more than ``max_batch_size`` inputs is
        split into batches of that size (queued together, answered in order)."""
        mb = self.max_batch
        if len(inputs) <= mb:
            return await self._predict_one(inputs)
        parts = await asyncio.gather(*(self._predict_one(inputs[i:i + mb], i)
                                       for i in range(0, len(inputs), mb)))
        return [y for part in parts for y in part]

    async def _predict_one(self, inputs: list[object], offset: int = 0) -> list[object]:
        if self.closed:
            raise HTTPError(503, "the model is being stopped.")
        if len(self.queue) >= self.max_queued:
            raise HTTPError(503, f"{len(self.queue)} requests are waiting already (the "
                                 f"limit is max_queued_requests={self.max_queued}); retry later.")
        fut: asyncio.Future = self.loop.create_future()
        self.queue.append(_Request(inputs, fut, self.loop.time(), offset))
        self.queued_inputs += len(inputs)
        self._arrived.set()
        if self.queued_inputs >= self.max_batch:
            self._full.set()
        try:
            return await asyncio.wait_for(fut, self.timeout_s)
        except asyncio.TimeoutError:
            ready = sum(r.ready for r in self.replicas)
            raise HTTPError(503, (
                f"no replica answered within request_timeout_s={self.timeout_s:g} s "
                f"({ready} of {len(self.replicas)} replicas ready); retry later.")) from None

    def ready_count(self) -> int:
        return sum(r.ready for r in self.replicas)

    # -- batching -------------------------------------------------------------------------
    def _free_replica(self) -> ReplicaSlot | None:
        for r in self.replicas:
            if r.ready and not r.inflight:
                return r
        return None

    async def _dispatch(self) -> None:
        queue = self.queue
        while True:
            while not queue:
                self._arrived.clear()
                await self._arrived.wait()
            rep = self._free_replica()
            while rep is None:
                self._slot_free.clear()
                await self._slot_free.wait()
                rep = self._free_replica()
            if self.wait_s > 0 and self.queued_inputs < self.max_batch and queue:
                left = queue[0].arrived + self.wait_s - self.loop.time()
                if left > 0:
                    self._full.clear()
                    try:
                        await asyncio.wait_for(self._full.wait(), left)
                    except asyncio.TimeoutError:
                        pass
            if not rep.ready or rep.inflight:
                continue
            batch: list[_Request] = []
            n = 0
            while queue and (not batch or n + len(queue[0].inputs) <= self.max_batch):
                req = queue.popleft()
                self.queued_inputs -= len(req.inputs)
                if req.future.done():  # timed out while waiting
                    continue
                batch.append(req)
                n += len(req.inputs)
            if self.queued_inputs < self.max_batch:
                self._full.clear()
            if not batch:
                continue
            bid = next(self._ids)
            rep.inflight[bid] = batch
            self.batches += 1
            self.largest_batch = max(self.largest_batch, n)
            for req in batch:
                req.tries += 1
            rep.worker.send(("batch", bid, [req.inputs for req in batch],
                             [req.offset for req in batch]))

    # -- from replicas (called on the loop through call_soon_threadsafe) ------------------
    def on_frame(self, index: int, generation: int, frame: Any) -> None:
        rep = self.replicas[index]
        if generation != rep.generation:
            return  # an earlier incarnation of this replica
        kind = frame[0]
        if kind == "out":
            batch = rep.inflight.pop(frame[1], None)
            if batch is not None:
                for req, res in zip(batch, frame[2]):
                    if req.future.done():
                        continue
                    if res[0] == "ok":
                        req.future.set_result(res[1])
                    else:
                        req.future.set_exception(HTTPError(res[1], res[2]))
                self.answered += len(batch)
            self._slot_free.set()
        elif kind == "ready":
            rep.ready = True
            rep.pid = frame[1].get("pid")
            rep.device = frame[1].get("device")
            rep.warm = bool(frame[1].get("reused"))
            shape = frame[1].get("item_shape")
            self.item_shape = list(shape) if shape is not None else None
            self._slot_free.set()
            self.on_replica_exit(index, generation, "ready")
        elif kind == "fatal":
            rep.ready = False
            self.on_replica_exit(index, generation, "fatal:" + str(frame[1]))
        elif kind in ("__eof__", "__exit__"):
            was = rep.ready or bool(rep.inflight)
            rep.ready = False
            self._requeue(rep)
            if kind == "__exit__" or was:
                rep.generation += 1  # later frames of the dead process are ignored
                self.on_replica_exit(index, generation, None)

    def _requeue(self, rep: ReplicaSlot) -> None:
        """A dead replica's batches go back to the front of the queue (in order)."""
        batches = [rep.inflight[k] for k in sorted(rep.inflight)]
        rep.inflight.clear()
        again = []
        for batch in batches:
            for req in batch:
                if req.future.done():
                    continue
                if req.tries >= MAX_TRIES:
                    req.future.set_exception(HTTPError(503, (
                        f"the replica answering this request died {req.tries} times; the "
                        f"request was not retried again.")))
                else:
                    again.append(req)
        for req in reversed(again):
            self.queue.appendleft(req)
            self.queued_inputs += len(req.inputs)
        if again:
            self._arrived.set()
            if self.queued_inputs >= self.max_batch:
                self._full.set()

    def attach(self, index: int, worker: object, generation: int) -> None:
        rep = self.replicas[index]
        rep.worker = worker
        rep.generation = generation
        rep.ready = False

    def close(self) -> None:
        self.closed = True
        self.task.cancel()
        err = HTTPError(503, "the model is being stopped.")
        for req in self.queue:
            if not req.future.done():
                req.future.set_exception(err)
        self.queue.clear()
        for rep in self.replicas:
            for batch in rep.inflight.values():
                for req in batch:
                    if not req.future.done():
                        req.future.set_exception(err)
            rep.inflight.clear()


# --------------------------------------------------------------------------- ASGI


class ServeApp:
    """The HTTP routes of a served model (raw ASGI: no framework on the hot path)."""

    def __init__(self, prefix: str, info: Callable[[], dict[str, Any]],
                 front_ref: Callable[[], Front | None], max_body: int,
                 api_key: str | None = None) -> None:
        self.prefix = prefix
        self._key = f"Bearer {api_key}".encode() if api_key is not None else None
        self.predict_path = prefix + "/predict"
        self.info = info
        self.front_ref = front_ref
        self.max_body = max_body
        self.routes = {
            (prefix or "/"): "GET: name, version, config",
            self.predict_path: 'POST {"inputs": [...]} -> {"outputs": [...]}',
            prefix + "/health": "GET: 200 while the server runs",
            prefix + "/ready": "GET: 200 once a replica is ready, else 503",
        }

    async def __call__(self, scope: dict, receive: Callable[[], Awaitable[dict]],
                       send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        try:
            self._check_key(scope)
            status, body = await self._handle(scope, receive)
        except HTTPError as e:
            status, body = e.status, {"detail": e.detail}
        except RecursionError:
            status, body = 400, {"detail": "the request is nested too deeply to read; send "
                                           '{"inputs": [input, ...]} with plain inputs.'}
        except Exception as e:  # noqa: BLE001 - never leave a client without an answer
            status, body = 500, {"detail": f"{type(e).__name__}: {e}"}
        data = _dumps(body)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})

    def _check_key(self, scope: dict) -> None:
        if self._key is None:
            return
        for k, v in scope.get("headers") or ():
            if k == b"authorization" and hmac.compare_digest(v, self._key):
                return
        raise HTTPError(401, "this model is exposed to other machines and needs its key: "
                             "send 'Authorization: Bearer <key>' (the train server's token, "
                             "or handle.api_key of model.serve).")

    async def _handle(self, scope: dict, receive: Callable[[], Awaitable[dict]]
                      ) -> tuple[int, Any]:
        path = scope["path"]
        method = scope["method"]
        if len(path) > 1:
            path = path.rstrip("/")
        if path == self.predict_path:
            if method != "POST":
                raise HTTPError(405, f"{path} takes POST with a JSON body "
                                     f'{{"inputs": [...]}}, not {method}.')
            return 200, {"outputs": await self._predict(scope, receive)}
        if method not in ("GET", "HEAD"):
            if path in self.routes:
                raise HTTPError(405, f"{path} takes GET, not {method}.")
            raise HTTPError(404, self._not_found(path))
        front = self.front_ref()
        if path == (self.prefix or "/"):
            return 200, self.info()
        if path == self.prefix + "/health":
            return 200, {"status": "ok"}
        if path == self.prefix + "/ready":
            ready = front.ready_count() if front is not None else 0
            total = len(front.replicas) if front is not None else 0
            body = {"ready": ready > 0, "replicas_ready": ready, "replicas": total}
            return (200 if ready else 503), body
        raise HTTPError(404, self._not_found(path))

    def _not_found(self, path: str) -> str:
        shown = "; ".join(f"{k} ({v})" for k, v in self.routes.items())
        return f"no route {path}; this server has: {shown}."

    async def _read_body(self, scope: dict, receive: Callable[[], Awaitable[dict]]) -> bytes:
        for k, v in scope.get("headers") or ():
            if k == b"content-length":
                try:
                    size = int(v)
                except ValueError:
                    raise HTTPError(400, "bad Content-Length header.") from None
                if size > self.max_body:
                    raise HTTPError(413, self._too_big(size))
        chunks = []
        total = 0
        more = True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                raise HTTPError(400, "the client went away before sending the whole body.")
            chunk = msg.get("body", b"")
            total += len(chunk)
            if total > self.max_body:
                raise HTTPError(413, self._too_big(total))
            chunks.append(chunk)
            more = msg.get("more_body", False)
        return b"".join(chunks)

    def _too_big(self, size: int) -> str:
        return (f"the request body is {size} bytes; this model takes at most "
                f"{self.max_body} (serve_settings max_request_bytes). Send fewer inputs per "
                f"request.")

    async def _predict(self, scope: dict, receive: Callable[[], Awaitable[dict]]) -> object:
        raw = await self._read_body(scope, receive)
        try:
            body = _loads(raw)
        except RecursionError:
            raise HTTPError(400, "the body is nested too deeply to read; send "
                                 '{"inputs": [input, ...]} with plain inputs.') from None
        except ValueError as e:
            raise HTTPError(400, f"the body is not JSON ({e}); send "
                                 f'{{"inputs": [input, ...]}}.') from None
        if not isinstance(body, dict) or "inputs" not in body:
            got = f"an object with keys {sorted(body)[:10]}" if isinstance(body, dict) \
                else f"a JSON {type(body).__name__}"
            raise HTTPError(422, f'the body must be {{"inputs": [input, ...]}}; got {got}.')
        inputs = body["inputs"]
        if not isinstance(inputs, list) or not inputs:
            raise HTTPError(422, f'"inputs" must be a non-empty list of inputs (one per '
                                 f'prediction); got {_short(inputs)}.')
        if b"true" in raw or b"false" in raw:
            at = _find_bool(inputs)
            if at is not None:
                raise HTTPError(422, f"{at} is a boolean; inputs are numbers: send 1 or 0.")
        front = self.front_ref()
        if front is None:
            raise HTTPError(503, "the model is starting; retry shortly.")
        shape = front.item_shape
        if shape is not None:
            _check_shapes(inputs, shape)
        return await front.predict(inputs)


def _check_shapes(inputs: list[object], shape: list[int]) -> None:
    """A cheap structural check of each input against the model's per-input shape."""
    for j, x in enumerate(inputs):
        got = _nested_shape(x, len(shape))
        if got != shape:
            raise HTTPError(422, (
                f"inputs[{j}] has shape {got if got is not None else 'that is not an array'}; "
                f"the model expects each input to have shape {shape} (from its example_input)."))


def _nested_shape(x: object, depth: int) -> list[int] | None:
    """The shape of a nested list, following first elements only (the replica checks all)."""
    dims: list[int] = []
    cur = x
    while isinstance(cur, list) and len(dims) <= depth:
        dims.append(len(cur))
        if not cur:
            break
        cur = cur[0]
    if not dims and (isinstance(cur, bool) or not isinstance(cur, (int, float))):
        return None
    return dims
