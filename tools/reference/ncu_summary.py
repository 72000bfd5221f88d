#!/usr/bin/env python3
"""Sums an Nsight Compute CSV (ncu --metrics gpu__time_duration.sum --csv) per kernel and grid.

Usage: ncu_summary.py NCU_OUTPUT   (the CSV may follow the profiled program's own output)
Prints one line per (kernel, grid, block): launches, total and mean microseconds, share of the
whole, largest first. scripts/gpu-bench.sh runs it on a tinyllama prompt and two decode steps.
"""

import csv
import sys
from collections import defaultdict


def main():
    with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        sys.exit("ncu_summary: no CSV header (a line starting '\"ID\"') in " + sys.argv[1])
    total = defaultdict(float)
    count = defaultdict(int)
    for row in csv.DictReader(lines[start:]):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = row["Kernel Name"].split("(")[0].split("<")[0].replace("void ", "")
        key = (name, row.get("Grid Size", ""), row.get("Block Size", ""))
        total[key] += float(row["Metric Value"].replace(",", "")) / 1000.0  # ns -> us
        count[key] += 1
    whole = sum(total.values())
    print(f"{len(total)} kernel shapes, {sum(count.values())} launches, {whole:.1f} us in all")
    for key, us in sorted(total.items(), key=lambda kv: -kv[1]):
        print(f"{us:10.1f} us {100 * us / whole:5.1f}%  {count[key]:5d} x {us / count[key]:8.2f} us  "
              f"{key[0]} grid {key[1]} block {key[2]}")


if __name__ == "__main__":
    main()
