#!/usr/bin/env python3
"""Paired, alternating wall-time comparison of two commands (README, "Performance").

Usage: paired-timing.py PAIRS -- COMMAND_A... -- COMMAND_B...

Runs A and B alternately (A then B, then B then A, ...) after two warm-up rounds, so slow drift in
the machine's load hits both alike, and prints both medians and minimums, the ratio of medians,
the median of the per-pair ratios, and the ratio of minimums (A / B).
"""

import statistics
import subprocess
import sys
import time


def main():
    args = sys.argv[1:]
    pairs = int(args[0])
    rest = args[1:]
    if not rest or rest[0] != "--" or "--" not in rest[1:]:
        sys.exit(__doc__)
    k = rest.index("--", 1)
    a_cmd, b_cmd = rest[1:k], rest[k + 1 :]

    def run(cmd):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        return time.perf_counter() - t0

    for _ in range(2):
        run(a_cmd)
        run(b_cmd)
    a, b = [], []
    for i in range(pairs):
        if i % 2:
            b.append(run(b_cmd))
            a.append(run(a_cmd))
        else:
            a.append(run(a_cmd))
            b.append(run(b_cmd))
    ma, mb = statistics.median(a), statistics.median(b)
    print(
        f"pairs={pairs} A median {ma * 1000:.1f} ms (min {min(a) * 1000:.1f}), "
        f"B median {mb * 1000:.1f} ms (min {min(b) * 1000:.1f}), ratio of medians {ma / mb:.2f}, "
        f"median paired ratio {statistics.median(x / y for x, y in zip(a, b)):.2f}, "
        f"ratio of minimums {min(a) / min(b):.2f}"
    )


if __name__ == "__main__":
    main()
