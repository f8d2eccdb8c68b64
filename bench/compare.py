#!/usr/bin/env python3
"""Before and after: bench_roundtrip's figures from two builds run in turn.

    bench/compare.py --before=b1.json,b2.json --after=a1.json,a2.json

Prints, per round trip (tcp/2, step/1000000, ...), the median of each
counter over every repetition of each side and their ratio (after / before),
and the step's ratio to the TCP exchange of the same runs. Written by
scripts/bench-compare.sh, which alternates the two builds so that both see
the same load.
"""

import argparse
import json
import statistics
import sys

from report import ROUNDTRIP_COUNTERS, fmt, roundtrip_samples


def pooled(paths):
    """{(kind, size): {counter: [values over every file]}}"""
    out = {}
    for path in paths:
        with open(path) as f:
            for key, entry in roundtrip_samples(json.load(f)).items():
                merged = out.setdefault(key, {counter: [] for counter in ROUNDTRIP_COUNTERS})
                for counter in ROUNDTRIP_COUNTERS:
                    merged[counter].extend(entry[counter])
    return out


def median(values):
    values = [v for v in values if v == v]  # NaN: a counter this build lacks
    return statistics.median(values) if values else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, help="comma-separated bench_roundtrip JSON files")
    parser.add_argument("--after", required=True, help="comma-separated bench_roundtrip JSON files")
    args = parser.parse_args()
    before = pooled(args.before.split(","))
    after = pooled(args.after.split(","))

    print(f"{'round trip':<16} {'counter':<20} {'before':>10} {'after':>10} {'after/before':>13}")
    for key in sorted(set(before) & set(after), key=lambda k: (k[0], int(k[1]))):
        for counter in ROUNDTRIP_COUNTERS:
            b, a = median(before[key][counter]), median(after[key][counter])
            if b is None or a is None:
                continue
            r = f"{a / b:.2f}×" if b else "—"
            print(f"{'/'.join(key):<16} {counter:<20} {fmt(b):>10} {fmt(a):>10} {r:>13}")
    print()
    for size in sorted({k[1] for k in after if k[0] == "step"}, key=int):
        row = []
        for name, side in (("before", before), ("after", after)):
            step, tcp = side.get(("step", size)), side.get(("tcp", size))
            if step and tcp:
                row.append(f"{name} {median(step['p50_us']) / median(tcp['p50_us']):.2f}×")
        print(f"step/{size} p50 / tcp/{size} p50: " + ", ".join(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
