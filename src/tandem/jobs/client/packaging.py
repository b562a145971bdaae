"""``runtime_env``: checking it, and packing a ``working_dir`` (``.gitignore`` honoured,
size-limited) into the zip a train server unpacks for a job's workers.

Which files: in a git work tree, what ``git ls-files --cached --others
--exclude-standard`` lists (git's own ``.gitignore`` rules, global excludes included);
elsewhere, the ``.gitignore`` files of the folder read here. Either way ``.git``,
``__pycache__``, virtual environments and tool caches stay out.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import os
import subprocess
import sys
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


def _too_big(root: str, limit_bytes: int) -> ConfigError:
    return ConfigError(
        f"runtime_env working_dir {root} holds more than the server's upload "
        f"limit of {limit_bytes / 2**20:.0f} MiB (after .gitignore). Leave data "
        f"and outputs out with a .gitignore, point working_dir at the folder with "
        f"your code only, or start the server with a larger --max-upload-mb."
    )


def _too_many(root: str, max_files: int) -> ConfigError:
    return ConfigError(
        f"runtime_env working_dir {root} holds more than {max_files} files (after "
        f".gitignore); point working_dir at the folder with your code only, or list what to "
        f"leave out in a .gitignore."
    )


def _git_files(root: str) -> list[str] | None:
    """The files git would keep under ``root`` (relative paths), or None outside a work
    tree (or without git)."""
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    names = out.stdout.decode(sys.getfilesystemencoding(), "surrogateescape").split("\0")
    return sorted(n for n in dict.fromkeys(names) if n)


def working_dir_files(path: str, limit_bytes: int | None = None,
                      max_files: int | None = None) -> list[tuple[str, str]]:
    """``(relative path, full path)`` of the files a ``working_dir`` upload holds.

    Raises:
        ConfigError: ``path`` is not a folder, or the files exceed ``limit_bytes`` or
            ``max_files`` (checked while listing: a huge folder is not walked to its end).
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
    tracked = _git_files(root)
    if tracked is not None:
        for rel in tracked:
            parts = rel.split("/")
            if any(_ignored("/".join(parts[:i + 1]), i < len(parts) - 1, base)
                   for i in range(len(parts))):
                continue
            full = os.path.join(root, *parts)
            if os.path.islink(full) or not os.path.isfile(full):
                continue  # deleted but tracked, a submodule, a link
            total += os.path.getsize(full)
            if limit_bytes is not None and total > limit_bytes:
                raise _too_big(root, limit_bytes)
            files.append((rel, full))
            if max_files is not None and len(files) > max_files:
                raise _too_many(root, max_files)
        return files
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
                    raise _too_big(root, limit_bytes)
                files.append((rel, entry.path))
                if max_files is not None and len(files) > max_files:
                    raise _too_many(root, max_files)
    return files


def package_working_dir(path: str, limit_bytes: int | None = None,
                        max_files: int | None = None) -> tuple[str, bytes]:
    """Zips a folder for upload; returns ``(package_id, zip_bytes)``.

    The files are ``working_dir_files(path)``: what ``.gitignore`` ignores (and ``.git``,
    ``__pycache__``, virtual environments) is left out. The id is a hash of the content.

    Raises:
        ConfigError: ``path`` is not a folder, or the files exceed ``limit_bytes`` or
            ``max_files``.
    """
    files = working_dir_files(path, limit_bytes, max_files)
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


#: the cap on the folder sent by default (the script's): past it, nothing is sent.
DEFAULT_WORKING_DIR_MAX_BYTES = 50 * 2**20
DEFAULT_WORKING_DIR_MAX_FILES = 5000


def script_folder() -> tuple[str, str] | None:
    """``(folder, file name)`` of the script this process runs (``python path/to/x.py``);
    None in an interactive session, under ``python -c`` or ``python -m``."""
    main = sys.modules.get("__main__")
    if main is None or getattr(main, "__spec__", None) is not None:
        return None
    path = getattr(main, "__file__", None)
    if not isinstance(path, str) or not path.endswith((".py", ".pyw")) or \
            not os.path.isfile(path):
        return None  # a console script (pytest, ...) is no user's project folder
    path = os.path.abspath(path)
    return os.path.dirname(path), os.path.basename(path)


def check_runtime_env(runtime_env: object) -> dict[str, Any]:
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
