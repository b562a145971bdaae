"""Loading a submitted job on the server: the payload (a cloudpickled ``JobSpec``), checked
field by field before anything is recorded or queued.

A payload is hostile input: unpickling runs code, so anything it raises (``SystemExit``
and ``KeyboardInterrupt`` included) becomes a ``PayloadError`` (HTTP 422); a spec that
unpickles but asks for impossible things (negative or NaN resources, an empty gang, an
unknown placement strategy, environment variables no process can have) becomes a
``SpecError`` (HTTP 422) naming the field.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import math
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping

import cloudpickle

from tandem._core.errors import TandemError
from tandem.cluster.base import STRATEGIES
from tandem.jobs.spec import JobSpec
from tandem.server.runner_hooks import LoadCheck

__all__ = [
    "MAX_BUNDLES",
    "PayloadError",
    "SpecError",
    "check_env_vars",
    "decode_payload",
    "load_spec",
    "validate_spec",
]

_load_lock = threading.Lock()

#: Bounds on what one job may ask for (a JobSpec is posted by anyone holding the token).
MAX_BUNDLES = 10_000
MAX_RESOURCE_KINDS = 64
MAX_RESOURCE_NAME = 128
MAX_RESOURCE_AMOUNT = 1e15  # memory is in bytes: a petabyte per worker is plenty
MAX_ENV_VARS = 1_000
MAX_ENV_NAME = 256
MAX_ENV_VALUE = 32 * 1024
MAX_NAME = 512
MAX_TAGS = 64
MAX_TAG = 256
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class PayloadError(TandemError, ValueError):
    """A submitted job cannot be loaded on the server (HTTP 422)."""


class SpecError(TandemError, ValueError):
    """A submitted job asks for something no job may ask for (HTTP 422).

    Attributes:
        loc: where in the request the bad value is, e.g. ``("payload", "bundles", 0, "CPU")``.
    """

    def __init__(self, loc: tuple[str | int, ...], msg: str) -> None:
        super().__init__(msg)
        self.loc = loc


@contextlib.contextmanager
def _import_path(folder: str | None) -> Iterator[None]:
    """Puts ``folder`` first on ``sys.path`` while loading a job; afterwards forgets the
    modules imported from it, so jobs with same-named modules never see each other's."""
    if folder is None:
        yield
        return
    with _load_lock:
        sys.path.insert(0, folder)
        try:
            yield
        finally:
            try:
                sys.path.remove(folder)
            except ValueError:
                pass
            prefix = os.path.join(folder, "")
            for name, mod in list(sys.modules.items()):
                f = getattr(mod, "__file__", None) or ""
                if f.startswith(prefix):
                    sys.modules.pop(name, None)


def describe_load_error(e: BaseException, working_dir: str | None) -> str:
    if isinstance(e, ModuleNotFoundError) and e.name:
        where = ("the uploaded working_dir does not have it either" if working_dir else
                 "no working_dir was uploaded with the job")
        return (
            f"The job needs the module {e.name!r}, which the train server cannot import "
            f"({where}). Send your code along with tandem.init(address=..., "
            f"runtime_env={{'working_dir': '.'}}) from the folder that holds {e.name!r}, or "
            f"install the module where the server runs."
        )
    return (
        f"The job payload could not be loaded on the train server: {type(e).__name__}: {e}. "
        f"Submit jobs with tandem (trainer.fit() with TANDEM_ADDRESS set); if the payload "
        f"refers to your own modules, send them with runtime_env={{'working_dir': '.'}}."
    )


def decode_payload(payload_b64: str) -> bytes:
    try:
        return base64.b64decode(payload_b64, validate=True)
    except (binascii.Error, ValueError) as e:
        raise PayloadError(f"payload is not base64 text ({e}); send "
                           f"base64(cloudpickle.dumps(job_spec))") from e


def load_spec(raw: bytes, working_dir: str | None) -> JobSpec:
    """Unpickles and checks a job spec.

    Raises:
        PayloadError: it does not unpickle here (whatever it raised), or is not a JobSpec.
        SpecError: a field no job may have (see ``validate_spec``).
    """
    with _import_path(working_dir):
        try:
            spec = cloudpickle.loads(raw)
        except BaseException as e:  # noqa: BLE001
            raise PayloadError(describe_load_error(e, working_dir)) from None
        if not isinstance(spec, JobSpec):
            raise PayloadError(
                f"The payload is a {type(spec).__name__}, not a tandem JobSpec; submit "
                f"jobs with tandem (trainer.fit() with TANDEM_ADDRESS set)."
            )
        validate_spec(spec)
        try:
            if isinstance(spec.runner, LoadCheck):
                spec.runner.check_loadable()
        except BaseException as e:  # noqa: BLE001
            raise PayloadError(describe_load_error(e, working_dir)) from None
    return spec


def _finite_amount(loc: tuple[str | int, ...], value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(loc, f"{_where(loc)} is {value!r} ({type(value).__name__}); a resource "
                             f"amount is a number >= 0, e.g. {{'CPU': 1}}")
    f = float(value)
    if not math.isfinite(f) or f < 0 or f > MAX_RESOURCE_AMOUNT:
        raise SpecError(loc, f"{_where(loc)} is {value!r}; a resource amount is a finite "
                             f"number between 0 and {MAX_RESOURCE_AMOUNT:g}")
    return f


def _where(loc: tuple[str | int, ...]) -> str:
    return ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in loc).replace(".[", "[")


def validate_spec(spec: JobSpec) -> None:
    """Refuses (``SpecError``) a spec whose fields no job may have: checked on the server
    because a spec can be posted by hand, bypassing every client-side check."""
    bundles = spec.bundles
    loc: tuple[str | int, ...] = ("payload", "bundles")
    if not isinstance(bundles, (tuple, list)) or not bundles:
        raise SpecError(loc, f"JobSpec.bundles is {bundles!r}; a job is a non-empty gang: one "
                             f"resource bundle per worker, e.g. ({{'CPU': 1}},)")
    if len(bundles) > MAX_BUNDLES:
        raise SpecError(loc, f"JobSpec.bundles has {len(bundles)} workers; at most "
                             f"{MAX_BUNDLES} per job")
    for i, bundle in enumerate(bundles):
        if not isinstance(bundle, Mapping):
            raise SpecError((*loc, i), f"bundles[{i}] is {type(bundle).__name__}; give a dict "
                                       f"of resource name to amount, e.g. {{'CPU': 1}}")
        if len(bundle) > MAX_RESOURCE_KINDS:
            raise SpecError((*loc, i), f"bundles[{i}] names {len(bundle)} resources; at most "
                                       f"{MAX_RESOURCE_KINDS}")
        for k, v in bundle.items():
            if not isinstance(k, str) or not k or len(k) > MAX_RESOURCE_NAME:
                raise SpecError((*loc, i), f"bundles[{i}] has the resource name {k!r}; names "
                                           f"are non-empty strings of at most "
                                           f"{MAX_RESOURCE_NAME} characters")
            _finite_amount((*loc, i, k), v)
    if spec.strategy not in STRATEGIES:
        raise SpecError(("payload", "strategy"),
                        f"JobSpec.strategy is {spec.strategy!r}; known strategies are "
                        f"{', '.join(STRATEGIES)}")
    if isinstance(spec.priority, bool) or not isinstance(spec.priority, int) or not (
            -(2**31) <= spec.priority < 2**31):
        raise SpecError(("payload", "priority"),
                        f"JobSpec.priority is {spec.priority!r}; give an int in [-2**31, 2**31)")
    check_name(("payload", "name"), spec.name)
    check_tags(("payload", "tags"), spec.tags)


def check_name(loc: tuple[str | int, ...], name: object) -> None:
    if not isinstance(name, str) or len(name) > MAX_NAME or "\x00" in name:
        raise SpecError(loc, f"the job name {name!r:.80} is not a string of at most {MAX_NAME} "
                             f"characters without NUL bytes")


def check_tags(loc: tuple[str | int, ...], tags: object) -> None:
    if not isinstance(tags, (tuple, list)) or len(tags) > MAX_TAGS:
        raise SpecError(loc, f"tags {tags!r:.80} are not a list of at most {MAX_TAGS} strings")
    for i, t in enumerate(tags):
        if not isinstance(t, str) or not t or len(t) > MAX_TAG or "\x00" in t:
            raise SpecError((*loc, i), f"tag {t!r:.80} is not a non-empty string of at most "
                                       f"{MAX_TAG} characters without NUL bytes")


def check_env_vars(env_vars: Mapping[str, object], loc: tuple[str | int, ...]) -> None:
    """Environment variables every worker could really be given: POSIX names, string
    values without NUL bytes, bounded sizes."""
    if len(env_vars) > MAX_ENV_VARS:
        raise SpecError(loc, f"{len(env_vars)} environment variables; at most {MAX_ENV_VARS}")
    for k, v in env_vars.items():
        if not isinstance(k, str) or not _ENV_NAME.match(k) or len(k) > MAX_ENV_NAME:
            raise SpecError((*loc, str(k)[:64]),
                            f"environment variable name {k!r:.80} is not valid: use letters, "
                            f"digits and '_', not starting with a digit (e.g. MY_FLAG), at most "
                            f"{MAX_ENV_NAME} characters")
        if not isinstance(v, str) or "\x00" in v or len(v) > MAX_ENV_VALUE:
            raise SpecError((*loc, k),
                            f"environment variable {k}'s value {v!r:.80} is not a string of at "
                            f"most {MAX_ENV_VALUE} characters without NUL bytes")
