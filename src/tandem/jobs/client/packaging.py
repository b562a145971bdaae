"""``runtime_env``: checking it, and packing a ``working_dir`` (``.gitignore`` honoured,
size-limited) into the zip a train server unpacks for a job's workers.

Which files: in a git work tree, what ``git ls-files --cached --others
--exclude-standard`` lists (git's own ``.gitignore`` rules, global excludes included);
elsewhere, the ``.gitignore`` files of the folder read here. Either way ``.git``,
``__pycache__``, virtual environments and tool caches stay out.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import zipfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

from tandem._core.errors import ConfigError

_ALWAYS_IGNORED = (".git", "__pycache__", "*.pyc", ".tandem", ".venv", "venv", ".mypy_cache",
                   ".pytest_cache", ".ruff_cache", "*.egg-info")

#: A folder holding a ``CACHEDIR.TAG`` that starts with this line is a cache
#: (https://bford.info/cachedir/): never uploaded. A train server tags its storage folder so.
CACHEDIR_SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"


def write_cachedir_tag(folder: str, what: str) -> None:
    """Marks ``folder`` as a cache that a ``working_dir`` upload (and backup tools) leave out."""
    path = os.path.join(folder, "CACHEDIR.TAG")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(CACHEDIR_SIGNATURE + b"\n# " + what.encode() + b"\n")


class _Rules:
    """What a ``working_dir`` upload leaves out, Ray's rules and git's: the always-ignored
    names; ``runtime_env["excludes"]`` (gitignore patterns relative to the working_dir);
    each folder's ``.rayignore`` (a match anywhere excludes, as in Ray); each folder's
    ``.gitignore`` when git does not list the files (the deepest match decides, as in git);
    and folders tagged with a ``CACHEDIR.TAG``."""

    def __init__(self, root: str, excludes: Sequence[str], read_gitignore: bool) -> None:
        import pathspec

        self._pathspec = pathspec
        self._root = root
        self._always = pathspec.GitIgnoreSpec.from_lines(_ALWAYS_IGNORED)
        self._excludes = pathspec.GitIgnoreSpec.from_lines(excludes) if excludes else None
        self._read_gitignore = read_gitignore
        self._own: dict[str, tuple[GitIgnoreSpec | None, GitIgnoreSpec | None]] = {}  # folder -> (.gitignore, .rayignore)
        self._cache: dict[str, bool] = {}  # folder -> holds a CACHEDIR.TAG

    def _spec(self, rel_dir: str, name: str) -> GitIgnoreSpec | None:
        try:
            with open(os.path.join(self._root, rel_dir, name), errors="replace") as f:
                return self._pathspec.GitIgnoreSpec.from_lines(f.read().splitlines())
        except OSError:
            return None

    def _files_of(self, rel_dir: str) -> tuple[GitIgnoreSpec | None, GitIgnoreSpec | None]:
        own = self._own.get(rel_dir)
        if own is None:
            own = (self._spec(rel_dir, ".gitignore") if self._read_gitignore else None,
                   self._spec(rel_dir, ".rayignore"))
            self._own[rel_dir] = own
        return own

    def is_cache(self, rel_dir: str) -> bool:
        tagged = self._cache.get(rel_dir)
        if tagged is None:
            try:
                with open(os.path.join(self._root, rel_dir, "CACHEDIR.TAG"), "rb") as f:
                    tagged = f.read(len(CACHEDIR_SIGNATURE)) == CACHEDIR_SIGNATURE
            except OSError:
                tagged = False
            self._cache[rel_dir] = tagged
        return tagged

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """``rel`` (a path under the root, ``/``-separated) is left out; its parent folders
        are not (the walk skips those before it gets here; ``ignored_path`` checks them)."""
        probe = rel + "/" if is_dir else rel
        if self._always.match_file(probe):
            return True
        if self._excludes is not None and self._excludes.match_file(probe):
            return True
        parts = rel.split("/")
        git_verdict: bool | None = None
        for depth in range(len(parts) - 1, -1, -1):  # the deepest folder first
            base = "/".join(parts[:depth])
            below = probe[len(base) + 1:] if base else probe
            gitignore, rayignore = self._files_of(base)
            if rayignore is not None and rayignore.match_file(below):
                return True
            if git_verdict is None and gitignore is not None:
                git_verdict = gitignore.check_file(below).include
        return bool(git_verdict)

    def ignored_path(self, rel: str) -> bool:
        """A file's path as git lists it: left out if it, or a folder above it, is."""
        parts = rel.split("/")
        for depth in range(len(parts)):
            folder = "/".join(parts[:depth])
            if depth and self.ignored(folder, True):
                return True
            if self.is_cache(folder):
                return True
        return self.ignored(rel, False)


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
                      max_files: int | None = None,
                      excludes: Sequence[str] = ()) -> list[tuple[str, str]]:
    """``(relative path, full path)`` of the files a ``working_dir`` upload holds: not what
    ``.gitignore``, ``.rayignore`` or ``excludes`` (gitignore patterns, relative to
    ``path``) match, nor a cache folder (``CACHEDIR.TAG``).

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
    files: list[tuple[str, str]] = []
    total = 0
    tracked = _git_files(root)
    rules = _Rules(root, excludes, read_gitignore=tracked is None)
    if tracked is not None:
        for rel in tracked:
            if rules.ignored_path(rel):
                continue
            full = os.path.join(root, *rel.split("/"))
            if os.path.islink(full) or not os.path.isfile(full):
                continue  # deleted but tracked, a submodule, a link
            total += os.path.getsize(full)
            if limit_bytes is not None and total > limit_bytes:
                raise _too_big(root, limit_bytes)
            files.append((rel, full))
            if max_files is not None and len(files) > max_files:
                raise _too_many(root, max_files)
        return files
    stack = [""] if not rules.is_cache("") else []
    while stack:
        rel_dir = stack.pop()
        try:
            entries = sorted(os.scandir(os.path.join(root, rel_dir)), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entry.is_symlink() and entry.is_dir():
                continue
            is_dir = entry.is_dir()
            if rules.ignored(rel, is_dir):
                continue
            if is_dir:
                if not rules.is_cache(rel):
                    stack.append(rel)
            elif entry.is_file():
                total += entry.stat().st_size
                if limit_bytes is not None and total > limit_bytes:
                    raise _too_big(root, limit_bytes)
                files.append((rel, entry.path))
                if max_files is not None and len(files) > max_files:
                    raise _too_many(root, max_files)
    return files


def package_working_dir(path: str, limit_bytes: int | None = None,
                        max_files: int | None = None,
                        excludes: Sequence[str] = ()) -> tuple[str, bytes]:
    """Zips a folder for upload; returns ``(package_id, zip_bytes)``.

    The files are ``working_dir_files(path, excludes=excludes)``: what ``.gitignore``,
    ``.rayignore`` and ``excludes`` match (and ``.git``, ``__pycache__``, virtual
    environments, cache folders) is left out. The id is a hash of the content.

    Raises:
        ConfigError: ``path`` is not a folder, or the files exceed ``limit_bytes`` or
            ``max_files``.
    """
    files = working_dir_files(path, limit_bytes, max_files, excludes)
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
    """Validates ``runtime_env`` (``{"working_dir": str, "excludes": [str], "env_vars":
    {str: str}}``): Ray's fields tandem takes, the others refused saying what to do."""
    if runtime_env is None:
        return {}
    if not isinstance(runtime_env, Mapping):
        raise ConfigError(
            f"runtime_env must be a dict such as {{'working_dir': '.', 'env_vars': {{...}}}}, "
            f"got {type(runtime_env).__name__}."
        )
    installs = sorted(set(runtime_env) & _RAY_INSTALL_KEYS)
    if installs:
        raise ConfigError(
            f"runtime_env{installs}: tandem installs nothing per job (Ray's {', '.join(installs)} "
            f"field{'s' if len(installs) > 1 else ''}); install the packages in the environment "
            f"the workers run in (the train server's, for jobs sent to one) and keep "
            f"'working_dir', 'excludes' and 'env_vars'."
        )
    unknown = set(runtime_env) - {"working_dir", "excludes", "env_vars"}
    if unknown:
        raise ConfigError(
            f"runtime_env has unknown key(s) {sorted(unknown)}; allowed: 'working_dir', "
            f"'excludes', 'env_vars'."
        )
    excludes = runtime_env.get("excludes")
    if excludes is not None and (isinstance(excludes, (str, bytes)) or not isinstance(
            excludes, Sequence) or not all(isinstance(x, str) for x in excludes)):
        raise ConfigError(
            f"runtime_env['excludes'] must be a list of gitignore patterns (relative to the "
            f"working_dir), e.g. ['data/', '*.ckpt']; got {excludes!r:.80}."
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
    if excludes:
        out["excludes"] = list(excludes)
    return out


#: Ray's runtime_env fields that install software for a job.
_RAY_INSTALL_KEYS = frozenset({"pip", "uv", "conda", "container", "image_uri", "py_modules",
                               "py_executable", "java_jars"})
