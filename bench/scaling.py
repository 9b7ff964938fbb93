#!/usr/bin/env python3
"""Median scaling factor of the in-process engine benchmark (issue 4).

Runs `cargo bench --bench scaling` (criterion: GET, SET and INCR through the whole command path
on one shared keyspace, with 1 and with 2 threads pinned to their own cores) several times and
prints, per command, the throughput ratio 2 threads / 1 thread of every round and the median.
CEILING is private arithmetic with no shared memory at all: what
this machine gives two threads, the bound for the others. GET-own-db is GET with each thread
in its own database: no keyspace cache line shared, the control for the contention model. This machine's two vCPUs are shared with other tenants, so single rounds vary; the median of
several is the figure to quote.

    python3 bench/scaling.py --rounds 5

By default it runs the paired measurement instead (`benches/scaling_paired.rs`): each
2-thread run timed right next to a 1-thread run, the median over many pairs, and the
contention of a shared keyspace against a database per thread. On a host whose speed drifts
within seconds that is the steadier figure; `--criterion` gives the rounds above.

    python3 bench/scaling.py            # paired, 41 pairs per workload
    python3 bench/scaling.py --criterion --rounds 5
"""
import argparse
import json
import os
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRIT = os.path.join(ROOT, "target", "criterion")


def median_ns(group, threads):
    with open(os.path.join(CRIT, f"scaling_{group}", str(threads), "new", "estimates.json")) as f:
        return json.load(f)["median"]["point_estimate"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--measurement-time", type=int, default=3)
    ap.add_argument("--criterion", action="store_true")
    ap.add_argument("--pairs", type=int, default=41)
    a = ap.parse_args()
    if not a.criterion:
        subprocess.run(["cargo", "bench", "-q", "--bench", "scaling_paired", "--", str(a.pairs)],
                       cwd=ROOT, check=True)
        return
    ratios = {c: [] for c in ("CEILING", "GET", "SET", "INCR", "GET-own-db")}
    for r in range(a.rounds):
        subprocess.run(["cargo", "bench", "-q", "--bench", "scaling", "--", "--warm-up-time", "1",
                        "--measurement-time", str(a.measurement_time), "--noplot"],
                       cwd=ROOT, check=True, capture_output=True)
        line = []
        for c in ratios:
            t1, t2 = median_ns(c, 1), median_ns(c, 2)
            # Each iteration is one batch per thread, so throughput(2)/throughput(1) = 2·t1/t2.
            ratios[c].append(2 * t1 / t2)
            line.append(f"{c} {32e3 / t1:5.2f}→{64e3 / t2:5.2f} M/s ({ratios[c][-1]:.2f}x)")
        print(f"round {r + 1}: " + "   ".join(line), flush=True)
    print("median scaling, 2 threads / 1 thread: " +
          "   ".join(f"{c} {statistics.median(v):.2f}x" for c, v in ratios.items()))


if __name__ == "__main__":
    main()
