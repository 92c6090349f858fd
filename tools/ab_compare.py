"""Compare collectives-benchmark JSON runs of two builds (tools/ab_collectives.sh).

    python tools/ab_compare.py BASE.json [BASE.json ...] -- NEW.json [NEW.json ...]

For every (op, group, system) row in both sets: the median over runs of the device time and
of the host enqueue time, base and new, and new / base. Rows present on one side only are
listed as such. Any row with #wrong > 0 on either side is flagged.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict

Key = tuple[str, str, str]


def load(paths: list[str]) -> dict[Key, dict[str, list[float]]]:
    rows: dict[Key, dict[str, list[float]]] = defaultdict(lambda: {"time_us": [], "host_us": [], "wrong": []})
    for path in paths:
        with open(path) as f:
            for row in json.load(f)["rows"]:
                key = (row["op"], row["group"], row["system"])
                for field in ("time_us", "host_us", "wrong"):
                    rows[key][field].append(float(row[field]))
    return rows


def compare(base: dict[Key, dict[str, list[float]]], new: dict[Key, dict[str, list[float]]]) -> list[str]:
    lines = [f"{'op':<3} {'group':>18} {'system':>26} {'time base':>10} {'new':>9} {'new/base':>8} "
             f"{'host base':>10} {'new':>9} {'new/base':>8}"]
    for key in sorted(set(base) | set(new)):
        op, group, system = key
        if key not in base or key not in new:
            lines.append(f"{op:<3} {group:>18} {system:>26}  only in {'new' if key in new else 'base'}")
            continue
        b, n = base[key], new[key]
        tb, tn = statistics.median(b["time_us"]), statistics.median(n["time_us"])
        hb, hn = statistics.median(b["host_us"]), statistics.median(n["host_us"])
        wrong = "  #wrong > 0" if max(b["wrong"] + n["wrong"]) > 0 else ""
        lines.append(f"{op:<3} {group:>18} {system:>26} {tb:10.1f} {tn:9.1f} {tn / tb:8.3f} "
                     f"{hb:10.1f} {hn:9.1f} {hn / hb:8.3f}{wrong}")
    return lines


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    cut = argv.index("--")
    base_paths, new_paths = argv[:cut], argv[cut + 1:]
    if not base_paths or not new_paths:
        print("ab_compare: need at least one JSON file on each side of --", file=sys.stderr)
        return 2
    print("\n".join(compare(load(base_paths), load(new_paths))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
