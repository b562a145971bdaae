"""Entry point of one measurement subprocess.

``python -m benchmarks._child MODULE:FUNCTION PARAMS_JSON`` calls
``FUNCTION(params, workdir)`` and writes the figures it returns, as JSON, to
``$BENCH_RESULT_FILE``. ``$BENCH_WORKDIR`` is a fresh directory for the measurement.
Only the standard library is imported here; the function imports what it measures.
"""

from __future__ import annotations

import importlib
import json
import os
import sys


def main() -> None:
    target, params_json = sys.argv[1], sys.argv[2]
    module_name, _, func_name = target.partition(":")
    func = getattr(importlib.import_module(module_name), func_name)
    figures = func(json.loads(params_json), os.environ["BENCH_WORKDIR"])
    path = os.environ["BENCH_RESULT_FILE"]
    with open(path + ".tmp", "w") as f:
        json.dump(figures, f)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
