"""The clean reset between two trials in one reused worker process (``_worker_main``):
the environment and the user's modules as a fresh process has them, done cheaply."""

from __future__ import annotations

import os
import sys
import types

from tandem.cluster import _worker_main as wm


def test_restore_environ_puts_back_exactly_the_saved_environment(monkeypatch):
    monkeypatch.setenv("TB_KEEP", "same")
    monkeypatch.setenv("TB_CHANGED", "before")
    monkeypatch.delenv("TB_ADDED", raising=False)
    saved = dict(os.environ)
    os.environ["TB_CHANGED"] = "after"
    os.environ["TB_ADDED"] = "by the task"
    del os.environ["TB_KEEP"]
    wm._restore_environ(saved)
    assert dict(os.environ) == saved
    assert os.environ["TB_CHANGED"] == "before" and "TB_ADDED" not in os.environ
    assert os.getenv("TB_KEEP") == "same"  # the process environment too, not only the dict


def test_restore_environ_with_the_encoded_snapshot_still_restores_a_change(monkeypatch):
    """The quick check (the encoded mapping unchanged: nothing to do) never skips a change:
    a variable set, changed or removed by the task is put back, the process's too."""
    monkeypatch.setenv("TB_KEEP", "same")
    monkeypatch.delenv("TB_ADDED", raising=False)
    saved, data = dict(os.environ), wm._environ_data()
    assert data is not None  # CPython's os.environ keeps one
    wm._restore_environ(saved, data)  # nothing changed: the environment as it was
    assert dict(os.environ) == saved
    os.environ["TB_ADDED"] = "by the task"
    os.environ["TB_KEEP"] = "changed"
    wm._restore_environ(saved, data)
    assert dict(os.environ) == saved and os.getenv("TB_KEEP") == "same"
    assert "TB_ADDED" not in os.environ
    del os.environ["TB_KEEP"]
    wm._restore_environ(saved, data)
    assert os.getenv("TB_KEEP") == "same"


def test_drop_user_modules_forgets_user_modules_only(tmp_path):
    baseline = set(sys.modules)
    user = types.ModuleType("tb_user_mod")
    user.__file__ = str(tmp_path / "tb_user_mod.py")
    installed = types.ModuleType("tb_installed_mod")
    installed.__file__ = os.path.join(wm._installed_roots()[0], "tb_installed_mod.py")
    builtin = types.ModuleType("tb_builtin_mod")  # no __file__
    for m in (user, installed, builtin):
        sys.modules[m.__name__] = m
    try:
        wm._drop_user_modules(baseline)
        assert "tb_user_mod" not in sys.modules
        assert sys.modules.get("tb_installed_mod") is installed
        assert sys.modules.get("tb_builtin_mod") is builtin
    finally:
        for name in ("tb_user_mod", "tb_installed_mod", "tb_builtin_mod"):
            sys.modules.pop(name, None)
    assert wm._installed_roots() is wm._installed_roots()  # looked up once
    assert wm._rss_mb() > 1.0
