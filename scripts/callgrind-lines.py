#!/usr/bin/env python3
"""Cost per source line of ours, with the standard library's inlined code counted at the line
of ours that it was inlined into (docs/performance.md, "Finding the next step").

`callgrind-parts.py` sorts cost into parts by file and function; inlined `Vec`, slice and
`VecDeque` code then shows up as lines of the standard library (`slice/index.rs:278`,
`raw_vec/mod.rs:612`) with no way to tell which line of ours paid for it. This script reads the
cost of every instruction (callgrind's `--dump-instr=yes`) and asks `addr2line -i` for the chain
of inlined frames at each instruction, so a bounds check lands on the `self.w.brokers[b]` that
made it.

Usage:
  CARGO_PROFILE_PERF_DEBUG=line-tables-only cargo build --profile perf --bin sim --target-dir /tmp/prof
  valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file=/tmp/cg.lines \\
      /tmp/prof/perf/sim run scenarios/bench/mmc.toml   # (or a smaller copy)
  scripts/callgrind-lines.py /tmp/cg.lines /tmp/prof/perf/sim --messages 1000000 [--top 60]
      [--chains] [--files]

Lines are the innermost frame in this repository's `sim/`, `strategies/` or `cli/` sources;
`FILE:?` is code the compiler gave no line (mostly spills and reloads around calls).
"""

import argparse
import collections
import os
import re
import subprocess
import sys

OURS = re.compile(r"(^|/)(sim|strategies|cli)/src/")


def instruction_costs(path, binary_name):
    """Exclusive cost per instruction address of the object named `binary_name`."""
    names, cur_ob, cost = {}, None, collections.Counter()
    in_call, last = False, 0
    with open(path) as f:
        for line in f:
            if line.startswith(("ob=", "cob=")):
                # A compressed name is given once, where the object is first named, which may
                # be a callee's `cob=` line.
                m = re.match(r"c?ob=\((\d+)\)(?: (.*))?", line.strip())
                if m.group(2):
                    names[m.group(1)] = m.group(2)
                if line.startswith("ob="):
                    cur_ob = names.get(m.group(1), "")
                continue
            if line.startswith("calls="):
                in_call = True
                continue
            c = line[:1]
            if not (c.isdigit() or c in "+-*"):
                in_call = False
                continue
            parts = line.split()
            a = parts[0]
            if a.startswith("0x"):
                addr = int(a, 16)
            elif a[0] == "+":
                addr = last + int(a[1:])
            elif a[0] == "-":
                addr = last - int(a[1:])
            elif a == "*":
                addr = last
            else:
                addr = int(a)
            last = addr
            if in_call:
                # The line after `calls=` is the call's inclusive cost, not this instruction's.
                in_call = False
                continue
            if len(parts) >= 3 and os.path.basename(cur_ob or "") == binary_name:
                cost[addr] += int(parts[2])
    return cost


def inline_chains(binary, addrs):
    """Address -> [(function, file:line)], innermost first."""
    out = subprocess.run(
        ["addr2line", "-i", "-f", "-C", "-a", "-e", binary],
        input="\n".join(hex(a) for a in addrs),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    chains, cur, i = {}, None, 0
    while i < len(out):
        if out[i].startswith("0x"):
            cur = int(out[i], 16)
            chains[cur] = []
            i += 1
            continue
        loc = out[i + 1] if i + 1 < len(out) else ""
        chains[cur].append((out[i], re.sub(r" \(discriminator \d+\)", "", loc)))
        i += 2
    return chains


def short(loc):
    m = OURS.search(loc)
    return loc[m.start() + len(m.group(1)):] if m else loc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile", help="callgrind output written with --dump-instr=yes")
    ap.add_argument("binary", help="the profiled binary (built with line tables)")
    ap.add_argument("--messages", type=int, default=0, help="divide by this for a cost per message")
    ap.add_argument("--top", type=int, default=60)
    ap.add_argument("--chains", action="store_true", help="show each line's top inline chains")
    ap.add_argument("--files", action="store_true", help="totals per source file instead")
    args = ap.parse_args()

    cost = instruction_costs(args.profile, os.path.basename(args.binary))
    if not cost:
        sys.exit(f"no instruction costs for {args.binary} in {args.profile} (--dump-instr=yes?)")
    chains = inline_chains(args.binary, sorted(cost))
    total = sum(cost.values())
    site, via = collections.Counter(), collections.defaultdict(collections.Counter)
    for addr, n in cost.items():
        chain = chains.get(addr, [])
        key = next((short(loc) for _, loc in chain if OURS.search(loc)), None)
        if key is None:
            key = short(chain[0][1]) if chain else "?"
        site[key] += n
        via[key][" <- ".join(os.path.basename(loc) for _, loc in chain[:4])] += n

    per = (lambda n: f"{n / args.messages:8.1f}/msg") if args.messages else (lambda n: "")
    print(f"{total:>14,} {per(total)} total of {args.binary}")
    if args.files:
        files = collections.Counter()
        for k, n in site.items():
            files[k.rsplit(":", 1)[0]] += n
        for f, n in files.most_common(args.top):
            print(f"{n:>14,} {per(n)} {f}")
        return
    sources = {}
    for k, n in site.most_common(args.top):
        text = ""
        f, _, line = k.rpartition(":")
        if line.isdigit() and OURS.search("/" + f):
            if f not in sources:
                try:
                    with open(f) as src:
                        sources[f] = src.read().splitlines()
                except OSError:
                    sources[f] = []
            lines = sources[f]
            if 0 < int(line) <= len(lines):
                text = lines[int(line) - 1].strip()[:70]
        print(f"{n:>14,} {per(n)} {k}  {text}")
        if args.chains:
            for chain, m in via[k].most_common(3):
                print(f"{'':>16}{m:>12,} {chain}")


if __name__ == "__main__":
    main()
