"""The dashboard's ES modules, without a browser: every import names a module the package
ships and a name that module exports, the pages load their entry as a module, and the gate
serves each module as JavaScript (a module script served as anything else does not run).
The browser test (tests/integration/dashboard/test_modules_browser.py) runs them."""

from __future__ import annotations

import re
from importlib import resources

from tandem.server.dashboard.gate import DashboardGate, static_file
from tests.unit.server.test_dashboard_gate import TOKEN, Inner, call

STATIC = resources.files("tandem.server.dashboard") / "static"
IMPORT = re.compile(r'^import \{([^}]*)\} from "\./([\w.]+)";$', re.M)
EXPORT = re.compile(r"^export (?:function|var) (\w+)", re.M)


def _modules() -> dict[str, str]:
    return {p.name: p.read_text() for p in STATIC.iterdir()
            if p.name.endswith(".js") and not p.name.startswith("uPlot")}


def test_every_import_resolves_and_every_module_is_reached():
    mods = _modules()
    exports = {name: set(EXPORT.findall(src)) for name, src in mods.items()}
    reached, todo = set(), ["app.js"]
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        src = mods[name]
        assert "window.tandem" not in src, name  # modules import each other
        for names, target in IMPORT.findall(src):
            assert target in mods, f"{name} imports {target}, which is not shipped"
            for n in (x.strip() for x in names.split(",")):
                assert n in exports[target], f"{name} imports {n} from {target}: not exported"
                assert re.search(rf"(?<![\w.]){n}\b", IMPORT.sub("", src)), f"{name}: {n} unused"
            todo.append(target)
    assert reached | {"login.js"} == set(mods), set(mods) - reached  # no orphan module
    assert len(mods) >= 12  # one per view and concern, not one file


def test_pages_load_modules_and_the_gate_serves_them_as_javascript():
    app = (static_file("app.html") or b"").decode()
    login = (static_file("login.html") or b"").decode()
    assert '<script type="module" src="/dashboard/static/app.js"></script>' in app
    assert '<script type="module" src="/dashboard/static/login.js"></script>' in login
    assert "team.js" not in app

    gate = DashboardGate(Inner(), TOKEN)
    for name in sorted(_modules()):
        status, h, _ = call(gate, f"/dashboard/static/{name}")
        assert status == 200, name
        assert h[b"content-type"] == [b"text/javascript; charset=utf-8"], name
        assert h[b"x-content-type-options"] == [b"nosniff"], name
        # one cache-control, the one that lets the browser keep the module a while
        assert h[b"cache-control"] == [b"max-age=300"], name
        assert all(len(v) == 1 for v in h.values()), (name, h)
