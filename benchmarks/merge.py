"""Merge benchmark runs: ``python -m benchmarks.merge BASE.json UPDATE.json... -o OUT.json``.

Each variant measured in an update replaces the base's (other variants, e.g. the peers
of a long full run, are kept), and the update's command line is recorded in
``meta.merged``. Used when a full run with every peer takes too long to repeat after a
change to tandem alone: the figures say which run each came from.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from benchmarks.cases import load_case
from benchmarks.run import compare


def merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(base))
    for name, case in update.get("cases", {}).items():
        target = out["cases"].setdefault(name, case)
        if target is case:
            continue
        for system, variant in case.get("variants", {}).items():
            if not variant.get("runs"):
                continue  # not selected or not measured in the update: keep the base's
            target["variants"][system] = {**variant, "from_run": update["meta"].get("date")}
        # ratios and pass/fail are recomputed from the merged medians
        target["comparisons"] = compare(load_case(name), target.get("params", {}),
                                        target["variants"])
    out["meta"].setdefault("merged", []).append({
        "date": update["meta"].get("date"), "argv": update["meta"].get("argv"),
        "load_avg_at_start": update["meta"].get("machine", {}).get("load_avg_at_start"),
    })
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("updates", nargs="+")
    ap.add_argument("-o", "--out", required=True)
    args = ap.parse_args()
    with open(args.base) as f:
        result = json.load(f)
    for path in args.updates:
        with open(path) as f:
            result = merge(result, json.load(f))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
