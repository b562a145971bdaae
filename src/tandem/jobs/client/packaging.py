"""``runtime_env``: checking it, and packing a ``working_dir`` (``.gitignore`` honoured,
size-limited) into the zip a train server unpacks for a job's workers."""

from __future__ import annotations

import fnmatch
import hashlib
import io
import os
import zipfile
from collections.abc import Mapping
from typing import Any

from tandem._core.errors import ConfigError

_ALWAYS_IGNORED = (".git", "__pycache__", "*.pyc", ".tandem", ".venv", "venv", ".mypy_cache",
                   ".pytest_cache", ".ruff_cache", "*.egg-info")


def _load_ignore(root: str, rel_dir: str) -> list[tuple[str, bool, bool, bool]]:
    """Patterns of ``rel_dir/.gitignore``: (pattern, negated, dir_only, anchored)."""
    path = os.path.join(root, rel_dir, ".gitignore")
    out: list[tuple[str, bool, bool, bool]] = []
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for raw in lines:
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        if neg:
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        anchored = "/" in line
        line = line.lstrip("/")
        if anchored and rel_dir:
            line = f"{rel_dir}/{line}"
        out.append((line, neg, dir_only, anchored))
    return out


def _ignored(rel: str, is_dir: bool, patterns: list[tuple[str, bool, bool, bool]]) -> bool:
    name = rel.rsplit("/", 1)[-1]
    result = False
    for pat, neg, dir_only, anchored in patterns:
        if dir_only and not is_dir:
            continue
        if anchored:
            hit = fnmatch.fnmatchcase(rel, pat) or fnmatch.fnmatchcase(rel, pat.replace("**/", ""))
        else:
            hit = fnmatch.fnmatchcase(name, pat)
        if hit:
            result = not neg
    return result


def package_working_dir(path: str, limit_bytes: int | None = None) -> tuple[str, bytes]:
    """Zips a folder for upload; returns ``(package_id, zip_bytes)``.

    Files and folders matched by ``.gitignore`` files (and ``.git``, ``__pycache__``,
    virtual environments) are left out. The id is a hash of the content.

    Raises:
        ConfigError: ``path`` is not a folder, or the files exceed ``limit_bytes``.
    """
    root = os.path.abspath(os.path.expanduser(path))
    if not os.path.isdir(root):
        raise ConfigError(
            f"runtime_env={{'working_dir': {path!r}}}: {root} is not a folder; give the folder "
            f"holding your modules, e.g. '.'."
        )
    base = [(p, False, False, False) for p in _ALWAYS_IGNORED]
    files: list[tuple[str, str]] = []
    total = 0
    stack: list[tuple[str, list]] = [("", base + _load_ignore(root, ""))]
    while stack:
        rel_dir, patterns = stack.pop()
        try:
            entries = sorted(os.scandir(os.path.join(root, rel_dir)), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entry.is_symlink() and entry.is_dir():
                continue
            is_dir = entry.is_dir()
            if _ignored(rel, is_dir, patterns):
                continue
            if is_dir:
                stack.append((rel, patterns + _load_ignore(root, rel)))
            elif entry.is_file():
                total += entry.stat().st_size
                if limit_bytes is not None and total > limit_bytes:
                    raise ConfigError(
                        f"runtime_env working_dir {root} holds more than the server's upload "
                        f"limit of {limit_bytes / 2**20:.0f} MiB (after .gitignore). Leave data "
                        f"and outputs out with a .gitignore, point working_dir at the folder with "
                        f"your code only, or start the server with a larger --max-upload-mb."
                    )
                files.append((rel, entry.path))
    digest = hashlib.sha256()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, full in sorted(files):
            with open(full, "rb") as f:
                data = f.read()
            digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
            info = zipfile.ZipInfo(rel, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (os.stat(full).st_mode & 0o777) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return digest.hexdigest()[:32], buf.getvalue()


def check_runtime_env(runtime_env: Any) -> dict[str, Any]:
    """Validates ``runtime_env`` (``{"working_dir": str, "env_vars": {str: str}}``)."""
    if runtime_env is None:
        return {}
    if not isinstance(runtime_env, Mapping):
        raise ConfigError(
            f"runtime_env must be a dict such as {{'working_dir': '.', 'env_vars': {{...}}}}, "
            f"got {type(runtime_env).__name__}."
        )
    unknown = set(runtime_env) - {"working_dir", "env_vars"}
    if unknown:
        raise ConfigError(
            f"runtime_env has unknown key(s) {sorted(unknown)}; allowed: 'working_dir', 'env_vars'."
        )
    wd = runtime_env.get("working_dir")
    if wd is not None and not isinstance(wd, (str, os.PathLike)):
        raise ConfigError(f"runtime_env['working_dir'] must be a folder path, got {wd!r}.")
    env = runtime_env.get("env_vars") or {}
    if not isinstance(env, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise ConfigError(
            f"runtime_env['env_vars'] must map names to strings, e.g. {{'MY_FLAG': '1'}}; "
            f"got {env!r:.80}."
        )
    out: dict[str, Any] = {"env_vars": dict(env)}
    if wd is not None:
        out["working_dir"] = os.path.abspath(os.path.expanduser(os.fspath(wd)))
    return out
