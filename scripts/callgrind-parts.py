#!/usr/bin/env python3
"""Cost per message by part, from a callgrind profile of `sim run` (README, "Performance").

Usage: callgrind-parts.py CALLGRIND_OUT MESSAGES

Build with line tables so inlined code keeps its source file, e.g.
  CARGO_PROFILE_PERF_DEBUG=line-tables-only cargo build --profile perf --bin sim --target-dir /tmp/prof
Each line of `callgrind_annotate --inclusive=no` is a (source file, function) pair with its own
(exclusive) instruction count. A line goes to a part by its source file when that file is ours
or a dependency's, and by the enclosing function when the file is the standard library (inlined
Vec, VecDeque and slice code counts toward the function it was inlined into). Approximate by
nature: code inlined across parts is counted where its source lives.
"""

import collections
import re
import subprocess
import sys


def part(f, fn, rest):
    # The standard library's code, and our own containers' (`Ring`), count toward the function
    # they were inlined into.
    lib = "/rustc/" in f or f.endswith("sim/src/ring.rs")
    if "event_queue.rs" in f or "EventQueue" in fn or "binary_heap" in rest:
        return "event queue"
    if (
        re.search(r"rand|ppv-lite|chacha", f)
        or f.endswith("sim/src/dist.rs")
        or f.endswith("sim/src/rng.rs")
        or any(s in fn for s in ("KeyPicker", "Arrivals::next_gap", "Sampler::sample", "Rng::sample", "refill"))
        or fn.startswith("round")
    ):
        return "rng draws"
    if "checkers" in f or "hdrhistogram" in f or "history.rs" in f or "Checkers" in fn:
        return "history + checkers"
    if (
        "strategies/src" in f
        or ("broker.rs" in f and "dispatch" in fn)
        or (lib and ("dispatch" in fn or "strategies::" in fn))
    ):
        return "strategy + dispatch"
    # The engine's loop and strategy requests, then the world model: every other file of
    # sim/src/engine/ (state, producer, broker, network, consumer, redelivery, batch, failover,
    # faults, workload).
    if re.search(r"sim/src/engine/(mod|control|events)\.rs", f):
        return "engine loop + control"
    world = ("consumer::", "producer::", "broker::", "redelivery::", "failover::", "network::", "state::")
    if "sim/src/engine/" in f or (lib and any(w in fn for w in world)):
        return "world model (producer, broker, consumer)"
    if lib and any(w in fn for w in ("Engine", "run_named", "run_one")):
        return "engine loop + control"
    return "other (startup, loading, libc)"


def main():
    path, messages = sys.argv[1], int(sys.argv[2])
    out = subprocess.run(
        ["callgrind_annotate", "--inclusive=no", "--threshold=100", "--auto=no", path],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    total = None
    parts = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(\([^)]*\)\s+)?(\S.*)$", line)
        if not m:
            continue
        n = int(m.group(1).replace(",", ""))
        rest = m.group(3)
        if "PROGRAM TOTALS" in rest:
            total = n
            continue
        f, _, fn = rest.partition(":")
        parts[part(f, fn, rest)] += n
    for k, v in parts.most_common():
        print(f"{k:42s} {v:>13,d} {100 * v / total:5.1f}% {v / messages:7.0f}/msg")
    print(f"{'total':42s} {total:>13,d}        {total / messages:7.0f}/msg")


if __name__ == "__main__":
    main()
